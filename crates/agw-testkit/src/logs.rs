//! Capturing what code under test logs, to assert on it.

use std::sync::Arc;

/// Every `tracing` event emitted on this thread while installed (`set_default`), one line each:
/// level, message, then the other fields as `name=value`. Install it on a single-threaded test
/// runtime, so the tasks under test log on the test's thread.
#[derive(Clone, Default)]
pub struct LogCapture(Arc<std::sync::Mutex<String>>);

impl LogCapture {
    /// What was captured so far.
    pub fn text(&self) -> String {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The captured lines at `warn` that contain every one of `parts`.
    pub fn warnings_with(&self, parts: &[&str]) -> Vec<String> {
        self.text()
            .lines()
            .filter(|line| line.starts_with("WARN ") && parts.iter().all(|part| line.contains(part)))
            .map(str::to_owned)
            .collect()
    }
}

impl tracing::Subscriber for LogCapture {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        struct Fields(String, String);
        impl tracing::field::Visit for Fields {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.0 = format!("{value:?}");
                } else {
                    self.1.push_str(&format!(" {}={value:?}", field.name()));
                }
            }
        }
        let mut fields = Fields(String::new(), String::new());
        event.record(&mut fields);
        let line = format!("{} {}{}\n", event.metadata().level(), fields.0, fields.1);
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push_str(&line);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}
