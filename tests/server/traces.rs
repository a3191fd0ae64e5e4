//! OpenTelemetry traces over real OTLP/HTTP and OTLP/gRPC: the real `vivarium serve` binary exports to a
//! receiver on 127.0.0.1 that decodes what it gets with the official `opentelemetry-proto`
//! messages. A request with the caller's `traceparent` makes one trace with the caller's
//! trace id: the request's span a child of the caller's, admission, the worker job (with the
//! run's status and fuel) and an outbound request beneath it; no span carries the code. An
//! MCP tool call's `_meta.traceparent` is followed likewise.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use prost::Message as _;
use serde_json::json;

use crate::http_support::*;

/// One span as the receiver decoded it.
#[derive(Debug, Clone)]
struct Span {
    name: String,
    trace_id: String,
    span_id: String,
    parent_span_id: String,
    attributes: HashMap<String, String>,
}

/// Keeps every span of one OTLP export request.
fn keep(req: ExportTraceServiceRequest, kept: &Mutex<Vec<Span>>) {
    for rs in req.resource_spans {
        for ss in rs.scope_spans {
            for s in ss.spans {
                let attributes = s
                    .attributes
                    .into_iter()
                    .map(|kv| {
                        let v = match kv.value.and_then(|v| v.value) {
                            Some(Any::StringValue(s)) => s,
                            Some(Any::IntValue(i)) => i.to_string(),
                            Some(Any::DoubleValue(d)) => d.to_string(),
                            Some(Any::BoolValue(b)) => b.to_string(),
                            other => format!("{other:?}"),
                        };
                        (kv.key, v)
                    })
                    .collect();
                kept.lock().unwrap().push(Span {
                    name: s.name,
                    trace_id: hex::encode(s.trace_id),
                    span_id: hex::encode(s.span_id),
                    parent_span_id: hex::encode(s.parent_span_id),
                    attributes,
                });
            }
        }
    }
}

/// An OTLP/HTTP receiver on 127.0.0.1: its base URL, and every span it got.
async fn receiver() -> (String, Arc<Mutex<Vec<Span>>>) {
    let got = Arc::new(Mutex::new(Vec::new()));
    let kept = got.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: Bytes| {
            let kept = kept.clone();
            async move {
                keep(
                    ExportTraceServiceRequest::decode(body).expect("OTLP protobuf"),
                    &kept,
                );
                axum::http::StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, got)
}

/// An OTLP/gRPC receiver on 127.0.0.1 (tonic's server with the official service
/// definition): its URL, and every span it got.
async fn grpc_receiver() -> (String, Arc<Mutex<Vec<Span>>>) {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse;
    use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
        TraceService, TraceServiceServer,
    };

    struct Receiver(Arc<Mutex<Vec<Span>>>);

    #[tonic::async_trait]
    impl TraceService for Receiver {
        async fn export(
            &self,
            request: tonic::Request<ExportTraceServiceRequest>,
        ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
            keep(request.into_inner(), &self.0);
            Ok(tonic::Response::new(ExportTraceServiceResponse {
                partial_success: None,
            }))
        }
    }

    let got = Arc::new(Mutex::new(Vec::new()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let service = TraceServiceServer::new(Receiver(got.clone()));
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
            .await
            .unwrap()
    });
    (url, got)
}

/// `vivarium serve` exporting its traces as `otel` (flags) say, plus `extra` flags; the
/// process and its base URL.
async fn serve_traced(otel: &[&str], extra: &[&str]) -> (std::process::Child, String) {
    let scratch = scratch_dir("traces");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_vivarium"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(otel)
        .args(extra)
        .env("VIVARIUM_SCRATCH", &scratch)
        .env("VIVARIUM_VOLUME_DIR", scratch.with_extension("volumes"))
        .env("VIVARIUM_AUDIT_LOG", scratch.join("audit.jsonl"))
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .env_remove("OTEL_EXPORTER_OTLP_PROTOCOL")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let base = {
        use std::io::BufRead;
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        line.trim()
            .strip_prefix("vivarium: listening on ")
            .unwrap()
            .to_string()
    };
    wait_ready_at(&base).await;
    (child, base)
}

/// The spans of trace `trace`, once those named `names` all came (at most 30 s).
async fn trace_of(got: &Mutex<Vec<Span>>, trace: &str, names: &[&str]) -> Vec<Span> {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let spans: Vec<Span> = got
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.trace_id == trace)
            .cloned()
            .collect();
        if names.iter().all(|n| spans.iter().any(|s| s.name == *n)) || Instant::now() > until {
            return spans;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_with_a_traceparent_is_one_trace_under_the_callers_span() {
    let (otlp, got) = receiver().await;
    // A name the allow list lets through, on an address the operator does not allow.
    let (mut child, base) = serve_traced(
        &["--otel-endpoint", &otlp],
        &[
            "--egress-allow",
            "api.test",
            "--egress-test-resolve",
            "api.test=10.0.0.7",
        ],
    )
    .await;

    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let caller = "00f067aa0ba902b7";
    let code = "import urllib.request\n\
                try:\n    urllib.request.urlopen('http://api.test/x', timeout=5)\n\
                except OSError as e:\n    print('refused')\n\
                print('secret-looking-code-text')";
    let r = client()
        .post(format!("{base}/v1/execute"))
        .header("traceparent", format!("00-{trace}-{caller}-01"))
        .json(&json!({"code": code, "template": "python"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["stdout"], "refused\nsecret-looking-code-text\n", "{v}");

    let spans = trace_of(
        &got,
        trace,
        &["request", "admission", "worker.job", "egress.request"],
    )
    .await;
    let named = |n: &str| {
        spans
            .iter()
            .find(|s| s.name == n)
            .unwrap_or_else(|| panic!("no {n} span in {spans:#?}"))
    };
    let request = named("request");
    assert_eq!(
        request.parent_span_id, caller,
        "the caller's span is the request's parent"
    );
    assert_eq!(
        request.attributes["http.response.status_code"], "200",
        "{request:?}"
    );
    assert_eq!(request.attributes["door"], "http", "{request:?}");
    for child in ["admission", "worker.job", "egress.request"] {
        assert_eq!(
            named(child).parent_span_id,
            request.span_id,
            "{child} under the request"
        );
    }
    let job = named("worker.job");
    assert_eq!(job.attributes["vivarium.status"], "ok", "{job:?}");
    assert!(
        job.attributes["vivarium.fuel"].parse::<u64>().unwrap() > 0,
        "{job:?}"
    );
    let egress = named("egress.request");
    assert_eq!(
        egress.attributes["server.address"], "api.test",
        "{egress:?}"
    );
    assert_eq!(
        egress.attributes["vivarium.refused"], "address_not_allowed",
        "{egress:?}"
    );
    // Ids, kinds and figures only: the code and its output are nowhere.
    let everything = format!("{:?}", got.lock().unwrap());
    assert!(
        !everything.contains("secret-looking-code-text"),
        "{everything}"
    );

    // A request without one is a trace of its own.
    let r = client()
        .post(format!("{base}/v1/execute"))
        .json(&json!({"code": "1", "template": "python"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let until = Instant::now() + Duration::from_secs(30);
    let other = loop {
        let roots: Vec<Span> = got
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.name == "request" && s.trace_id != trace)
            .cloned()
            .collect();
        if let Some(s) = roots.into_iter().next() {
            break s;
        }
        assert!(Instant::now() < until, "no second trace");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(other.parent_span_id.is_empty(), "{other:?}");

    // Code mode: a round of tool calls is a span under the request that started the run,
    // from the calls leaving to their answer (a later request's).
    let cm_trace = "5bf92f3577b34da6a3ce929d0e0e4737";
    let r = client()
        .post(format!("{base}/v1/execute"))
        .header("traceparent", format!("00-{cm_trace}-{caller}-01"))
        .json(&json!({"code": "print(tools.noop())", "template": "python",
                      "tools": [{"name": "noop", "description": "nothing",
                                 "parameters": {"type": "object"}}]}))
        .send()
        .await
        .unwrap();
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["status"], "suspended", "{v}");
    let (st, done) = post(
        &client(),
        &format!(
            "{base}/v1/executions/{}/resume",
            v["execution_id"].as_str().unwrap()
        ),
        &json!({"results": [{"call_id": "call_1", "result": 7}]}),
    )
    .await;
    assert_eq!((st, &done["stdout"]), (200, &json!("7\n")), "{done}");
    let spans = trace_of(&got, cm_trace, &["request", "tool.round"]).await;
    let request = spans.iter().find(|s| s.name == "request").unwrap();
    let round = spans
        .iter()
        .find(|s| s.name == "tool.round")
        .unwrap_or_else(|| panic!("no tool.round span in {spans:#?}"));
    assert_eq!(round.parent_span_id, request.span_id, "{round:?}");
    assert_eq!(round.attributes["calls"], "1", "{round:?}");

    // An MCP tool call carries its caller's trace context in `_meta` (SEP-414).
    let mcp_trace = "0af7651916cd43dd8448eb211c80319c";
    let mut mcp = McpClient::open_at(format!("{base}/mcp"), client()).await;
    let answer = mcp
        .request(
            "tools/call",
            json!({"name": "execute_python", "arguments": {"code": "print(2)"},
                   "_meta": {"traceparent": format!("00-{mcp_trace}-b7ad6b7169203331-01")}}),
        )
        .await;
    assert!(answer.get("result").is_some(), "{answer}");
    let spans = trace_of(&got, mcp_trace, &["mcp.tool", "worker.job"]).await;
    let tool = spans
        .iter()
        .find(|s| s.name == "mcp.tool")
        .unwrap_or_else(|| panic!("no mcp.tool span in {spans:#?}"));
    assert_eq!(tool.parent_span_id, "b7ad6b7169203331", "{tool:?}");
    assert_eq!(tool.attributes["tool"], "execute_python", "{tool:?}");
    let job = spans.iter().find(|s| s.name == "worker.job").unwrap();
    assert_eq!(job.attributes["vivarium.status"], "ok", "{job:?}");

    // A volume operation is a span of its own under its request, naming the volume only.
    let vol_trace = "7af7651916cd43dd8448eb211c80319d";
    let r = client()
        .post(format!("{base}/v1/volumes"))
        .header("traceparent", format!("00-{vol_trace}-{caller}-01"))
        .json(&json!({"name": "traced"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let spans = trace_of(&got, vol_trace, &["request", "volume.create"]).await;
    let request = spans.iter().find(|s| s.name == "request").unwrap();
    let op = spans
        .iter()
        .find(|s| s.name == "volume.create")
        .unwrap_or_else(|| panic!("no volume.create span in {spans:#?}"));
    assert_eq!(op.parent_span_id, request.span_id, "{op:?}");
    assert_eq!(op.attributes["volume"], "traced", "{op:?}");
    let _ = child.kill();
    let _ = child.wait();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traces_go_over_grpc_when_the_protocol_says_so() {
    let (otlp, got) = grpc_receiver().await;
    let (mut child, base) =
        serve_traced(&["--otel-endpoint", &otlp, "--otel-protocol", "grpc"], &[]).await;
    let trace = "6cf92f3577b34da6a3ce929d0e0e4738";
    let caller = "00f067aa0ba902b8";
    let r = client()
        .post(format!("{base}/v1/execute"))
        .header("traceparent", format!("00-{trace}-{caller}-01"))
        .json(&json!({"code": "print(1)", "template": "python"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let spans = trace_of(&got, trace, &["request", "worker.job"]).await;
    let request = spans
        .iter()
        .find(|s| s.name == "request")
        .unwrap_or_else(|| panic!("no request span over gRPC: {spans:#?}"));
    assert_eq!(request.parent_span_id, caller, "{request:?}");
    let job = spans.iter().find(|s| s.name == "worker.job").unwrap();
    assert_eq!(job.parent_span_id, request.span_id, "{job:?}");
    assert_eq!(job.attributes["vivarium.status"], "ok", "{job:?}");
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn an_unknown_otlp_protocol_is_refused_at_start() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vivarium"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--otel-endpoint",
            "http://127.0.0.1:9",
        ])
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("http/json") && err.contains("grpc"), "{err}");
}
