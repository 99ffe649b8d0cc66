//! OpenTelemetry: the run spans (`agw_modes::runtime` `TRACE_TARGET`) exported over OTLP, and the
//! W3C trace context taken from requests and passed on to providers and webhooks
//! (`docs/observability.md`).
//!
//! Off unless the standard variables ask for it: `OTEL_EXPORTER_OTLP_ENDPOINT` or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` set, `OTEL_TRACES_EXPORTER` unset or `otlp`,
//! `OTEL_SDK_DISABLED` not `true`. `OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL` picks `http/protobuf`
//! (the default) or `grpc`; endpoint, headers, timeout and the batch settings (`OTEL_BSP_*`)
//! are read by the OpenTelemetry SDK itself. Spans leave through the SDK's batch processor: a
//! full queue drops spans, it never blocks a run.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agw_modes::runtime::RunTracing;
pub use agw_modes::runtime::TRACE_TARGET;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{Array, KeyValue, StringValue, Value};
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{BatchSpanProcessor, SdkTracerProvider, SpanData, SpanProcessor};
use tracing::Subscriber;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::registry::LookupSpan;

/// Whether spans are exported: trace context is only read and written then.
static ENABLED: AtomicBool = AtomicBool::new(false);
/// `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`.
static CAPTURE_CONTENT: AtomicBool = AtomicBool::new(false);

/// Attributes the GenAI conventions define as string arrays; `tracing` records them as one
/// string, turned back into an array (split at `,`) before export.
const ARRAY_ATTRIBUTES: &[&str] = &["gen_ai.response.finish_reasons"];

/// The OTLP transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtlpProtocol {
    /// `http/protobuf` (the OTLP default; port 4318).
    HttpProtobuf,
    /// `grpc` (port 4317).
    Grpc,
}

/// Telemetry that could not be set up as configured.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// A variable has a value agw cannot use.
    #[error("{name}={value:?}: {reason}")]
    Setting {
        /// The variable.
        name: &'static str,
        /// Its value.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The OTLP exporter could not be built.
    #[error("OTLP trace exporter: {0}")]
    Exporter(String),
}

/// What the `OTEL_*` variables (read through `var`) ask for: `None`, no export.
pub fn otlp_protocol(var: impl Fn(&str) -> Option<String>) -> Result<Option<OtlpProtocol>, TelemetryError> {
    let get = |name: &str| var(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
    if get("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return Ok(None);
    }
    if let Some(exporter) = get("OTEL_TRACES_EXPORTER") {
        match exporter.as_str() {
            "otlp" => {}
            "none" => return Ok(None),
            _ => {
                let reason = "only `otlp` and `none` are supported";
                return Err(TelemetryError::Setting { name: "OTEL_TRACES_EXPORTER", value: exporter, reason });
            }
        }
    }
    if get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_none() && get("OTEL_EXPORTER_OTLP_ENDPOINT").is_none() {
        return Ok(None);
    }
    let (name, protocol) = match get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") {
        Some(p) => ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", Some(p)),
        None => ("OTEL_EXPORTER_OTLP_PROTOCOL", get("OTEL_EXPORTER_OTLP_PROTOCOL")),
    };
    match protocol.as_deref() {
        None | Some("http/protobuf") => Ok(Some(OtlpProtocol::HttpProtobuf)),
        Some("grpc") => Ok(Some(OtlpProtocol::Grpc)),
        Some(other) => Err(TelemetryError::Setting {
            name,
            value: other.to_owned(),
            reason: "expected `http/protobuf` or `grpc` (`http/json` is not supported)",
        }),
    }
}

/// The trace pipeline of a process: build it once at start ([`Telemetry::from_env`]), add
/// [`Telemetry::layer`] to the `tracing` subscriber, call [`Telemetry::shutdown`] at exit so
/// the last spans are sent.
#[derive(Debug)]
pub struct Telemetry {
    provider: SdkTracerProvider,
    protocol: OtlpProtocol,
}

impl Telemetry {
    /// Builds the exporter the process environment asks for (`None`: tracing off). Call it
    /// inside the Tokio runtime (the gRPC exporter needs one).
    pub fn from_env() -> Result<Option<Self>, TelemetryError> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// [`Telemetry::from_env`] with the `OTEL_*` variables read through `var` (the OTLP headers
    /// and timeouts still come from the process environment, read by the SDK).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, TelemetryError> {
        let Some(protocol) = otlp_protocol(&var)? else {
            return Ok(None);
        };
        let get = |name: &str| var(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        // The generic endpoint is a base URL (HTTP appends the signal's path); the signal's own
        // is used as it is.
        let endpoint = match (get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), protocol) {
            (Some(url), _) => url,
            (None, OtlpProtocol::HttpProtobuf) => {
                format!("{}/v1/traces", get("OTEL_EXPORTER_OTLP_ENDPOINT").unwrap_or_default().trim_end_matches('/'))
            }
            (None, OtlpProtocol::Grpc) => get("OTEL_EXPORTER_OTLP_ENDPOINT").unwrap_or_default(),
        };
        let exporter = match protocol {
            OtlpProtocol::HttpProtobuf => opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                .with_endpoint(endpoint)
                .build(),
            OtlpProtocol::Grpc => {
                opentelemetry_otlp::SpanExporter::builder().with_tonic().with_endpoint(endpoint).build()
            }
        }
        .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
        let service = get("OTEL_SERVICE_NAME").unwrap_or_else(|| "agw".to_owned());
        let resource = Resource::builder().with_service_name(service).build();
        let processor = ArrayAttributes(BatchSpanProcessor::builder(exporter).build());
        let provider = SdkTracerProvider::builder().with_span_processor(processor).with_resource(resource).build();
        let capture =
            get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT").is_some_and(|v| v.eq_ignore_ascii_case("true"));
        CAPTURE_CONTENT.store(capture, Ordering::Relaxed);
        ENABLED.store(true, Ordering::Relaxed);
        Ok(Some(Self { provider, protocol }))
    }

    /// Sends every finished span now (blocking: call it outside async code).
    pub fn flush(&self) {
        if let Err(e) = self.provider.force_flush() {
            tracing::warn!("OpenTelemetry: flushing spans failed: {e}");
        }
    }

    /// The transport in use.
    pub fn protocol(&self) -> OtlpProtocol {
        self.protocol
    }

    /// The `tracing` layer that turns the run spans into OpenTelemetry spans; it sees only the
    /// spans of the run target, never log lines.
    pub fn layer<S>(&self) -> impl Layer<S> + Send + Sync + 'static
    where
        S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
    {
        let tracer = self.provider.tracer("agw");
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_level(false)
            .with_filter(Targets::new().with_target(TRACE_TARGET, tracing::Level::TRACE))
    }

    /// Sends what is queued and stops the exporter (waits up to 5 s). Blocking: call it outside
    /// async code (`spawn_blocking`).
    pub fn shutdown(&self) {
        ENABLED.store(false, Ordering::Relaxed);
        if let Err(e) = self.provider.shutdown_with_timeout(Duration::from_secs(5)) {
            tracing::warn!("OpenTelemetry: the last spans may be lost: {e}");
        }
    }
}

/// Whether spans are being exported.
pub(crate) fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The remote parent a request names in `traceparent`/`tracestate`; `None` when tracing is off
/// or the request names none (a malformed one is ignored, as the W3C spec asks).
pub(crate) fn remote_parent(headers: &http::HeaderMap) -> Option<opentelemetry::Context> {
    if !enabled() || !headers.contains_key("traceparent") {
        return None;
    }
    let cx = TraceContextPropagator::new().extract(&opentelemetry_http::HeaderExtractor(headers));
    use opentelemetry::trace::TraceContextExt as _;
    cx.span().span_context().is_valid().then_some(cx)
}

/// The current trace context as request headers (`traceparent`, `tracestate`); empty when
/// tracing is off or no span is current.
pub(crate) fn current_headers() -> Vec<(String, String)> {
    if !enabled() {
        return Vec::new();
    }
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(&opentelemetry::Context::current(), &mut carrier);
    let mut headers: Vec<(String, String)> = carrier.into_iter().collect();
    headers.sort();
    headers
}

/// How runs report to tracing in this process: trace headers on provider requests while spans
/// are exported; message contents on spans only with
/// `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`.
pub(crate) fn run_tracing() -> RunTracing {
    if !enabled() {
        return RunTracing::default();
    }
    RunTracing { propagate: Some(Arc::new(current_headers)), capture_content: CAPTURE_CONTENT.load(Ordering::Relaxed) }
}

/// The run core's tracing hooks, reporting to OpenTelemetry while spans are exported.
#[derive(Debug, Default)]
pub struct OtelTelemetry;

impl agw_runs::Telemetry for OtelTelemetry {
    fn run_tracing(&self) -> RunTracing {
        run_tracing()
    }

    fn carry(&self, run: futures::future::BoxFuture<'static, ()>) -> futures::future::BoxFuture<'static, ()> {
        if !enabled() {
            return run;
        }
        // The run's spans continue the trace of the request that started it.
        let cx = opentelemetry::Context::current();
        Box::pin(opentelemetry::context::FutureExt::with_context(run, cx))
    }
}

/// Hands spans to the batch processor with the array attributes restored.
#[derive(Debug)]
struct ArrayAttributes<P>(P);

impl<P: SpanProcessor> SpanProcessor for ArrayAttributes<P> {
    fn on_start(&self, span: &mut opentelemetry_sdk::trace::Span, cx: &opentelemetry::Context) {
        self.0.on_start(span, cx);
    }

    fn on_end(&self, mut span: SpanData) {
        for attribute in &mut span.attributes {
            if let Value::String(s) = &attribute.value
                && ARRAY_ATTRIBUTES.contains(&attribute.key.as_str())
            {
                let items: Vec<StringValue> = s.as_str().split(',').map(|s| StringValue::from(s.to_owned())).collect();
                *attribute = KeyValue::new(attribute.key.clone(), Value::Array(Array::String(items)));
            }
        }
        self.0.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.0.set_resource(resource);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn protocol(vars: &[(&str, &str)]) -> Result<Option<OtlpProtocol>, TelemetryError> {
        let vars: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        otlp_protocol(|name| vars.get(name).cloned())
    }

    #[test]
    fn off_unless_an_endpoint_is_set() {
        assert!(protocol(&[]).unwrap().is_none());
        assert!(protocol(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]).unwrap().is_none());
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318");
        assert_eq!(protocol(&[endpoint]).unwrap(), Some(OtlpProtocol::HttpProtobuf));
        assert!(protocol(&[endpoint, ("OTEL_SDK_DISABLED", "true")]).unwrap().is_none());
        assert!(protocol(&[endpoint, ("OTEL_TRACES_EXPORTER", "none")]).unwrap().is_none());
        let traces = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4318/v1/traces");
        assert_eq!(protocol(&[traces]).unwrap(), Some(OtlpProtocol::HttpProtobuf));
    }

    #[test]
    fn protocol_by_signal_then_generic_variable() {
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317");
        assert_eq!(protocol(&[endpoint, ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]).unwrap(), Some(OtlpProtocol::Grpc));
        let both = [
            endpoint,
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"),
        ];
        assert_eq!(protocol(&both).unwrap(), Some(OtlpProtocol::HttpProtobuf));
        let error = protocol(&[endpoint, ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")]).unwrap_err().to_string();
        assert!(error.contains("OTEL_EXPORTER_OTLP_PROTOCOL") && error.contains("http/json"), "{error}");
        let error = protocol(&[endpoint, ("OTEL_TRACES_EXPORTER", "zipkin")]).unwrap_err().to_string();
        assert!(error.contains("OTEL_TRACES_EXPORTER"), "{error}");
    }

    #[test]
    fn no_trace_context_while_tracing_is_off() {
        let mut headers = http::HeaderMap::new();
        headers.insert("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".parse().unwrap());
        assert!(remote_parent(&headers).is_none());
        assert!(current_headers().is_empty());
        assert!(run_tracing().propagate.is_none());
    }
}
