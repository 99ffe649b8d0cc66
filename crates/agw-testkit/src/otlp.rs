//! An in-process OTLP trace receiver: what an OpenTelemetry collector would get, decoded from the
//! real protobuf messages, for tests that check spans.
//!
//! One loopback port serves both transports: OTLP/HTTP (`POST /v1/traces`,
//! `application/x-protobuf`) and OTLP/gRPC (HTTP/2 without TLS,
//! `/opentelemetry.proto.collector.trace.v1.TraceService/Export`). Point an exporter at
//! [`OtlpReceiver::endpoint`].

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::{AnyValue, any_value};
use prost::Message;
use serde_json::Value;

/// One received span, flattened for assertions.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedSpan {
    /// Lower-case hex, 32 characters.
    pub trace_id: String,
    /// Lower-case hex, 16 characters.
    pub span_id: String,
    /// Lower-case hex; empty for a root span.
    pub parent_span_id: String,
    /// The span name (`invoke_agent demo`, `chat gpt-4o`, …).
    pub name: String,
    /// OTLP span kind (1 internal, 2 server, 3 client, 4 producer, 5 consumer).
    pub kind: i32,
    /// Attributes as JSON values (strings, numbers, booleans, arrays).
    pub attributes: BTreeMap<String, Value>,
    /// OTLP status code (0 unset, 1 ok, 2 error).
    pub status_code: i32,
    /// The status message.
    pub status_message: String,
    /// The exporting resource's `service.name`.
    pub service_name: String,
    /// Start and end, nanoseconds since the epoch.
    pub start_end: (u64, u64),
}

impl ReceivedSpan {
    /// An attribute (`Value::Null` when absent).
    pub fn attr(&self, key: &str) -> &Value {
        self.attributes.get(key).unwrap_or(&Value::Null)
    }
}

#[derive(Default)]
struct Received {
    spans: Vec<ReceivedSpan>,
    /// `http` or `grpc`, one per export request.
    transports: Vec<&'static str>,
}

/// The receiver; stops when dropped.
pub struct OtlpReceiver {
    addr: SocketAddr,
    received: Arc<Mutex<Received>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl OtlpReceiver {
    /// Binds a loopback port and starts serving.
    pub async fn start() -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let received = Arc::new(Mutex::new(Received::default()));
        let shared = received.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let shared = shared.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |request| {
                        let shared = shared.clone();
                        async move { Ok::<_, Infallible>(export(shared, request).await) }
                    });
                    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                    let _ = builder.serve_connection(TokioIo::new(stream), service).await;
                });
            }
        });
        Ok(Self { addr, received, task })
    }

    /// `http://127.0.0.1:<port>`: the value of `OTEL_EXPORTER_OTLP_ENDPOINT` for either transport.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.received.lock().unwrap_or_else(|e| e.into_inner()).spans.clone()
    }

    /// The transport of each export request so far (`http`, `grpc`).
    pub fn transports(&self) -> Vec<&'static str> {
        self.received.lock().unwrap_or_else(|e| e.into_inner()).transports.clone()
    }

    /// Waits (up to `within`) until `done` holds for the spans received, and returns them; the
    /// spans as they are when the time is up otherwise.
    pub async fn wait_for(&self, within: Duration, done: impl Fn(&[ReceivedSpan]) -> bool) -> Vec<ReceivedSpan> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let spans = self.spans();
            if done(&spans) || tokio::time::Instant::now() >= deadline {
                return spans;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

type ExportBody = StreamBody<futures::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, Infallible>>>>;

async fn export(received: Arc<Mutex<Received>>, request: Request<Incoming>) -> Response<ExportBody> {
    let grpc = request.headers().get("content-type").is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"));
    let path = request.uri().path().to_owned();
    let body = request.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let message = if grpc {
        // One length-prefixed message: compressed flag, 4-byte big-endian length, the bytes.
        body.get(5..).unwrap_or_default()
    } else {
        &body[..]
    };
    let accepted = (grpc && path == "/opentelemetry.proto.collector.trace.v1.TraceService/Export")
        || (!grpc && path == "/v1/traces");
    let decoded = ExportTraceServiceRequest::decode(message).ok().filter(|_| accepted);
    let Some(decoded) = decoded else {
        let frames = vec![Ok(Frame::data(Bytes::from_static(b"not an OTLP trace export")))];
        let mut response = Response::new(StreamBody::new(futures::stream::iter(frames)));
        *response.status_mut() = hyper::StatusCode::BAD_REQUEST;
        return response;
    };
    {
        let mut received = received.lock().unwrap_or_else(|e| e.into_inner());
        received.transports.push(if grpc { "grpc" } else { "http" });
        received.spans.extend(flatten(decoded));
    }
    let reply = ExportTraceServiceResponse::default().encode_to_vec();
    if grpc {
        let mut framed = vec![0u8];
        framed.extend_from_slice(&(reply.len() as u32).to_be_bytes());
        framed.extend_from_slice(&reply);
        let mut trailers = http::HeaderMap::new();
        trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
        let frames = vec![Ok(Frame::data(Bytes::from(framed))), Ok(Frame::trailers(trailers))];
        let mut response = Response::new(StreamBody::new(futures::stream::iter(frames)));
        response.headers_mut().insert("content-type", http::HeaderValue::from_static("application/grpc"));
        response
    } else {
        let frames = vec![Ok(Frame::data(Bytes::from(reply)))];
        let mut response = Response::new(StreamBody::new(futures::stream::iter(frames)));
        response.headers_mut().insert("content-type", http::HeaderValue::from_static("application/x-protobuf"));
        response
    }
}

fn flatten(request: ExportTraceServiceRequest) -> Vec<ReceivedSpan> {
    let mut out = Vec::new();
    for resource_spans in request.resource_spans {
        let service_name = resource_spans
            .resource
            .iter()
            .flat_map(|r| &r.attributes)
            .find(|kv| kv.key == "service.name")
            .and_then(|kv| kv.value.as_ref())
            .map(json)
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        for scope in resource_spans.scope_spans {
            for span in scope.spans {
                let attributes = span
                    .attributes
                    .iter()
                    .map(|kv| (kv.key.clone(), kv.value.as_ref().map_or(Value::Null, json)))
                    .collect();
                let status = span.status.unwrap_or_default();
                out.push(ReceivedSpan {
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                    name: span.name,
                    kind: span.kind,
                    attributes,
                    status_code: status.code,
                    status_message: status.message,
                    service_name: service_name.clone(),
                    start_end: (span.start_time_unix_nano, span.end_time_unix_nano),
                });
            }
        }
    }
    out
}

fn json(value: &AnyValue) -> Value {
    match &value.value {
        Some(any_value::Value::StringValue(s)) => Value::from(s.as_str()),
        Some(any_value::Value::BoolValue(b)) => Value::from(*b),
        Some(any_value::Value::IntValue(i)) => Value::from(*i),
        Some(any_value::Value::DoubleValue(d)) => Value::from(*d),
        Some(any_value::Value::ArrayValue(array)) => Value::Array(array.values.iter().map(json).collect()),
        Some(any_value::Value::KvlistValue(list)) => Value::Object(
            list.values.iter().map(|kv| (kv.key.clone(), kv.value.as_ref().map_or(Value::Null, json))).collect(),
        ),
        Some(any_value::Value::BytesValue(bytes)) => Value::from(hex(bytes)),
        _ => Value::Null,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
