//! The results of a set (docs/evals.md): per case and run, a table for people, JSON for
//! machines (and `agw eval compare`), JUnit XML for CI; whether the set met its threshold.

use serde::{Deserialize, Serialize};

use crate::score::CaseScore;

/// One run of a case (a case runs `--repeat` times).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunResult {
    /// Every expectation met.
    pub pass: bool,
    /// The trajectory score, when expected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trajectory: Option<f64>,
    /// The answer's ROUGE-1 F, when a reference was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<f64>,
    /// The judge's score, when the case has a rubric.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<f64>,
    /// The judge's reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_reason: Option<String>,
    /// Input and output tokens.
    pub tokens: u64,
    /// What it cost, when priced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    /// From the last turn's query to its run's end.
    pub elapsed_ms: u64,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<String>,
}

impl RunResult {
    /// A scored run.
    pub fn scored(score: CaseScore, tokens: u64, cost: Option<f64>, elapsed_ms: u64) -> Self {
        Self {
            pass: score.pass,
            trajectory: score.trajectory,
            answer: score.answer,
            judge: None,
            judge_reason: None,
            tokens,
            cost,
            elapsed_ms,
            failures: score.failures,
        }
    }

    /// A run that could not be played.
    pub fn unplayed(reason: String) -> Self {
        Self {
            pass: false,
            trajectory: None,
            answer: None,
            judge: None,
            judge_reason: None,
            tokens: 0,
            cost: None,
            elapsed_ms: 0,
            failures: vec![format!("not played: {reason}")],
        }
    }
}

/// A case's runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CaseResult {
    /// The case's id.
    pub id: String,
    /// Its agent.
    pub agent_key: String,
    /// Each run, in order.
    pub runs: Vec<RunResult>,
}

impl CaseResult {
    /// Share of its runs that passed.
    pub fn pass_rate(&self) -> f64 {
        pass_rate(&self.runs)
    }

    /// The `p`th percentile (0..=100, nearest rank) of its runs' times, in ms.
    pub fn percentile_ms(&self, p: f64) -> u64 {
        let mut times: Vec<u64> = self.runs.iter().map(|r| r.elapsed_ms).collect();
        times.sort_unstable();
        if times.is_empty() {
            return 0;
        }
        let rank = ((p / 100.0) * times.len() as f64).ceil() as usize;
        times[rank.clamp(1, times.len()) - 1]
    }

    /// The mean of `value` over the runs that have one.
    pub(crate) fn mean(&self, value: impl Fn(&RunResult) -> Option<f64>) -> Option<f64> {
        let values: Vec<f64> = self.runs.iter().filter_map(value).collect();
        (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
    }
}

/// A set's results.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetReport {
    /// The set's name.
    pub name: String,
    /// The pass rate it must reach.
    pub threshold: f64,
    /// Each case, in the set's order.
    pub cases: Vec<CaseResult>,
}

/// Share of `runs` that passed (0 without runs).
pub(crate) fn pass_rate<'a>(runs: impl IntoIterator<Item = &'a RunResult>) -> f64 {
    let (passed, all) = runs.into_iter().fold((0usize, 0usize), |(p, a), r| (p + usize::from(r.pass), a + 1));
    if all == 0 { 0.0 } else { passed as f64 / all as f64 }
}

impl SetReport {
    /// Share of all runs that passed.
    pub fn pass_rate(&self) -> f64 {
        pass_rate(self.cases.iter().flat_map(|c| &c.runs))
    }

    /// Whether the set reached its threshold.
    pub fn passed(&self) -> bool {
        !self.cases.is_empty() && self.pass_rate() >= self.threshold
    }

    /// A table for a terminal: one line per case, then the set's line.
    pub fn table(&self) -> String {
        let mut out = format!(
            "{:<28} {:>6} {:>6} {:>6} {:>6} {:>8} {:>9} {:>8} {:>8}\n",
            "case", "pass", "traj", "answer", "judge", "tokens", "cost", "p50 ms", "p95 ms"
        );
        let opt = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.2}"));
        for case in &self.cases {
            let tokens: u64 = case.runs.iter().map(|r| r.tokens).sum::<u64>() / case.runs.len().max(1) as u64;
            out.push_str(&format!(
                "{:<28} {:>6} {:>6} {:>6} {:>6} {:>8} {:>9} {:>8} {:>8}\n",
                truncate(&case.id, 28),
                format!("{:.0}%", case.pass_rate() * 100.0),
                opt(case.mean(|r| r.trajectory)),
                opt(case.mean(|r| r.answer)),
                opt(case.mean(|r| r.judge)),
                tokens,
                opt(case.mean(|r| r.cost)),
                case.percentile_ms(50.0),
                case.percentile_ms(95.0),
            ));
            if let Some(failed) = case.runs.iter().find(|r| !r.pass) {
                for failure in &failed.failures {
                    out.push_str(&format!("    ✗ {failure}\n"));
                }
            }
        }
        out.push_str(&format!(
            "{}: {:.0}% of runs passed (at least {:.0}% needed): {}\n",
            self.name,
            self.pass_rate() * 100.0,
            self.threshold * 100.0,
            if self.passed() { "PASS" } else { "FAIL" }
        ));
        out
    }

    /// JUnit XML: a test suite per set, a test case per case (failed when any run failed).
    pub fn junit(&self) -> String {
        let failures = self.cases.iter().filter(|c| c.runs.iter().any(|r| !r.pass)).count();
        let seconds = |ms: u64| format!("{:.3}", ms as f64 / 1000.0);
        let mut out = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\">\n",
            xml(&self.name),
            self.cases.len()
        );
        for case in &self.cases {
            let time = seconds(case.runs.iter().map(|r| r.elapsed_ms).sum());
            out.push_str(&format!(
                "    <testcase classname=\"{}\" name=\"{}\" time=\"{time}\"",
                xml(&case.agent_key),
                xml(&case.id)
            ));
            let failed: Vec<&String> = case.runs.iter().flat_map(|r| &r.failures).collect();
            if failed.is_empty() {
                out.push_str("/>\n");
            } else {
                let message = failed.iter().map(|f| f.as_str()).collect::<Vec<_>>().join("; ");
                out.push_str(&format!(
                    ">\n      <failure message=\"{}\">{}</failure>\n    </testcase>\n",
                    xml(&message),
                    xml(&message)
                ));
            }
        }
        out.push_str("  </testsuite>\n</testsuites>\n");
        out
    }
}

fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max { text.to_owned() } else { text.chars().take(max - 1).chain(['…']).collect() }
}

/// `text` escaped for an XML attribute or element.
fn xml(text: &str) -> String {
    text.chars()
        .filter(|c| !matches!(*c as u32, 0..=8 | 11 | 12 | 14..=31))
        .map(|c| match c {
            '&' => "&amp;".to_owned(),
            '<' => "&lt;".to_owned(),
            '>' => "&gt;".to_owned(),
            '"' => "&quot;".to_owned(),
            '\'' => "&apos;".to_owned(),
            c => c.to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(pass: bool, ms: u64) -> RunResult {
        RunResult {
            pass,
            trajectory: Some(if pass { 1.0 } else { 0.5 }),
            answer: None,
            judge: None,
            judge_reason: None,
            tokens: 10,
            cost: None,
            elapsed_ms: ms,
            failures: if pass { Vec::new() } else { vec!["a <b> & \"c\"".into()] },
        }
    }

    #[test]
    fn rates_percentiles_and_escaped_junit() {
        let case = CaseResult {
            id: "c&1".into(),
            agent_key: "a".into(),
            runs: vec![run(true, 10), run(false, 30), run(true, 20), run(true, 40)],
        };
        assert_eq!(case.pass_rate(), 0.75);
        assert_eq!((case.percentile_ms(50.0), case.percentile_ms(95.0)), (20, 40));
        let report = SetReport { name: "s".into(), threshold: 0.8, cases: vec![case] };
        assert!(!report.passed(), "75 % < 80 %");
        assert!(report.table().contains("s: 75% of runs passed (at least 80% needed): FAIL"));
        let xml = report.junit();
        assert!(xml.contains(r#"name="c&amp;1""#) && xml.contains("a &lt;b&gt; &amp; &quot;c&quot;"), "{xml}");
        assert!(
            !SetReport { name: "e".into(), threshold: 0.0, cases: Vec::new() }.passed(),
            "an empty set passes nothing"
        );
    }
}
