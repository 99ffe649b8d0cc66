//! `agw eval compare A.json B.json` (docs/evals.md): two result files of `agw eval run --json`
//! (say before and after a prompt change) side by side — per case the change of pass rate and
//! scores, regressions first — and the totals.

use serde::Deserialize;

use crate::report::{CaseResult, SetReport, pass_rate};

/// A results file: `{"sets": [...]}`.
#[derive(Debug, Clone, Deserialize)]
pub struct Results {
    /// Its sets.
    pub sets: Vec<SetReport>,
}

/// One case in both files.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseDelta {
    /// `set / case`.
    pub name: String,
    /// Pass rates before and after (`None`: not in that file).
    pub pass_rate: (Option<f64>, Option<f64>),
    /// Mean trajectory scores before and after.
    pub trajectory: (Option<f64>, Option<f64>),
    /// Mean answer scores before and after.
    pub answer: (Option<f64>, Option<f64>),
}

impl CaseDelta {
    /// How much the case lost (positive) or gained (negative): the pass rate first, then the
    /// scores.
    fn loss(&self) -> f64 {
        let drop = |(a, b): (Option<f64>, Option<f64>)| a.unwrap_or(0.0) - b.unwrap_or(0.0);
        drop(self.pass_rate) * 100.0 + drop(self.trajectory) + drop(self.answer)
    }

    /// Whether it got worse.
    pub fn regressed(&self) -> bool {
        self.loss() > 1e-9
    }
}

/// Every case of either file, regressions first (the worst first), then the rest by name.
pub fn compare(before: &Results, after: &Results) -> Vec<CaseDelta> {
    let index = |results: &Results| -> Vec<(String, CaseResult)> {
        results
            .sets
            .iter()
            .flat_map(|set| set.cases.iter().map(move |c| (format!("{} / {}", set.name, c.id), c.clone())))
            .collect()
    };
    let (a, b) = (index(before), index(after));
    let mut names: Vec<String> = a.iter().chain(&b).map(|(n, _)| n.clone()).collect();
    names.sort();
    names.dedup();
    let find = |list: &[(String, CaseResult)], name: &str| list.iter().find(|(n, _)| n == name).map(|(_, c)| c.clone());
    let mut deltas: Vec<CaseDelta> = names
        .into_iter()
        .map(|name| {
            let (x, y) = (find(&a, &name), find(&b, &name));
            let both = |f: &dyn Fn(&CaseResult) -> Option<f64>| (x.as_ref().and_then(f), y.as_ref().and_then(f));
            CaseDelta {
                pass_rate: both(&|c| Some(c.pass_rate())),
                trajectory: both(&|c| c.mean(|r| r.trajectory)),
                answer: both(&|c| c.mean(|r| r.answer)),
                name,
            }
        })
        .collect();
    deltas.sort_by(|x, y| y.loss().total_cmp(&x.loss()).then_with(|| x.name.cmp(&y.name)));
    deltas.sort_by_key(|d| !d.regressed());
    deltas
}

/// The comparison as a table, with the totals' line.
pub fn table(deltas: &[CaseDelta], before: &Results, after: &Results) -> String {
    let cell = |(a, b): (Option<f64>, Option<f64>), percent: bool| {
        let show = |v: Option<f64>| match v {
            None => "-".to_owned(),
            Some(v) if percent => format!("{:.0}%", v * 100.0),
            Some(v) => format!("{v:.2}"),
        };
        format!("{} → {}", show(a), show(b))
    };
    let mut out = format!("{:<40} {:>14} {:>14} {:>14}\n", "case", "pass", "trajectory", "answer");
    for d in deltas {
        out.push_str(&format!(
            "{}{:<38} {:>14} {:>14} {:>14}\n",
            if d.regressed() { "✗ " } else { "  " },
            d.name,
            cell(d.pass_rate, true),
            cell(d.trajectory, false),
            cell(d.answer, false),
        ));
    }
    let rate = |r: &Results| pass_rate(r.sets.iter().flat_map(|s| s.cases.iter().flat_map(|c| &c.runs)));
    let regressions = deltas.iter().filter(|d| d.regressed()).count();
    out.push_str(&format!(
        "total: {:.0}% → {:.0}% of runs passed; {regressions} case(s) regressed\n",
        rate(before) * 100.0,
        rate(after) * 100.0
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::RunResult;

    fn results(pass: &[(&str, bool, f64)]) -> Results {
        let cases = pass
            .iter()
            .map(|(id, pass, trajectory)| CaseResult {
                id: (*id).into(),
                agent_key: "a".into(),
                runs: vec![RunResult {
                    pass: *pass,
                    trajectory: Some(*trajectory),
                    answer: None,
                    judge: None,
                    judge_reason: None,
                    tokens: 1,
                    cost: None,
                    elapsed_ms: 1,
                    failures: Vec::new(),
                }],
            })
            .collect();
        Results { sets: vec![SetReport { name: "s".into(), threshold: 1.0, cases }] }
    }

    #[test]
    fn regressions_come_first_and_the_totals_say_how_many() {
        let before = results(&[("a", true, 1.0), ("b", true, 1.0), ("c", false, 0.5)]);
        let after = results(&[("a", true, 1.0), ("b", false, 0.5), ("c", true, 1.0), ("d", true, 1.0)]);
        let deltas = compare(&before, &after);
        assert_eq!(deltas[0].name, "s / b");
        assert!(deltas[0].regressed());
        assert_eq!(deltas[0].pass_rate, (Some(1.0), Some(0.0)));
        assert!(deltas[1..].iter().all(|d| !d.regressed()));
        assert_eq!(deltas.iter().find(|d| d.name == "s / d").unwrap().pass_rate, (None, Some(1.0)));
        let text = table(&deltas, &before, &after);
        assert!(text.lines().nth(1).unwrap().starts_with("✗ s / b"), "{text}");
        assert!(text.contains("total: 67% → 75% of runs passed; 1 case(s) regressed"), "{text}");
    }
}
