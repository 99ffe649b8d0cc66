//! Doom-loop detection (`docs/context.md`): the same tool called with the same arguments
//! `doomLoopThreshold` times in a row within a run (default 3). That call is not executed; the
//! model gets a result saying it repeats itself. A second doom loop in the run ends it with
//! `run.error` `doom_loop`. Every kind of call counts: backend, frontend, action, plan tools.

use serde_json::{Value, json};

/// What a call that is about to run should do.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Doom {
    /// Run it.
    Fine,
    /// Do not run it: this result goes to the model instead.
    Refused(String),
    /// Do not run it, and end the run after this batch (a second doom loop).
    Stop(String),
}

/// The run's latest call signature and how often it came in a row.
#[derive(Debug, Default)]
pub(crate) struct DoomWatch {
    last: Option<(String, String)>,
    repeats: u32,
    loops: u32,
}

impl DoomWatch {
    /// Notes the call `name(args)`; `threshold` 0 turns detection off.
    pub(crate) fn observe(&mut self, threshold: u32, name: &str, args: &Value) -> Doom {
        if threshold == 0 {
            return Doom::Fine;
        }
        let signature = (name.to_owned(), canonical(args));
        if self.last.as_ref() == Some(&signature) {
            self.repeats += 1;
        } else {
            self.last = Some(signature);
            self.repeats = 1;
        }
        if self.repeats < threshold {
            return Doom::Fine;
        }
        self.loops += 1;
        let result = json!({
            "executed": false,
            "reason": "doom_loop",
            "error": format!(
                "You called {name} with the same arguments {} times in a row; this call was not executed. \
                 Use the results you already have, change the arguments, or answer.",
                self.repeats
            ),
        })
        .to_string();
        if self.loops >= 2 { Doom::Stop(result) } else { Doom::Refused(result) }
    }
}

/// JSON text with object keys sorted at every level: the same arguments in another key order
/// are the same call.
fn canonical(value: &Value) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                Value::Object(entries.into_iter().map(|(k, v)| (k.clone(), sorted(v))).collect())
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(value).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_third_identical_call_is_refused_and_a_second_loop_stops_the_run() {
        let mut watch = DoomWatch::default();
        let args = json!({"city": "Shanghai", "days": 3});
        let reordered = json!({"days": 3, "city": "Shanghai"});
        assert_eq!(watch.observe(3, "weather", &args), Doom::Fine);
        assert_eq!(watch.observe(3, "weather", &reordered), Doom::Fine);
        let Doom::Refused(text) = watch.observe(3, "weather", &args) else { panic!("third call refused") };
        assert!(text.contains("\"reason\":\"doom_loop\"") && text.contains("weather"));
        // It keeps repeating after being told: the run ends.
        assert!(matches!(watch.observe(3, "weather", &args), Doom::Stop(_)));
    }

    #[test]
    fn other_arguments_or_tools_reset_the_count_and_zero_turns_it_off() {
        let mut watch = DoomWatch::default();
        for day in 0..10 {
            assert_eq!(watch.observe(3, "weather", &json!({"day": day})), Doom::Fine);
        }
        assert_eq!(watch.observe(3, "a", &json!({})), Doom::Fine);
        assert_eq!(watch.observe(3, "a", &json!({})), Doom::Fine);
        assert_eq!(watch.observe(3, "b", &json!({})), Doom::Fine);
        assert_eq!(watch.observe(3, "a", &json!({})), Doom::Fine);
        let mut off = DoomWatch::default();
        for _ in 0..10 {
            assert_eq!(off.observe(0, "a", &json!({})), Doom::Fine);
        }
    }
}
