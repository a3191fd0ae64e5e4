//! OpenTelemetry traces: off unless an endpoint is given (`--otel-endpoint`, or the
//! standard `OTEL_EXPORTER_OTLP_ENDPOINT`), and then the server's `tracing` spans (a request,
//! its admission, the worker job with the run's status, fuel and peak memory, each outbound
//! request, hibernation and waking, snapshot writes, package resolution) are exported as
//! OTLP, batched, sampled by `--otel-sample-ratio` (a caller's sampled `traceparent` is
//! followed): over HTTP/protobuf to `{endpoint}/v1/traces`, or over gRPC to the endpoint
//! (`--otel-protocol`), whose client runs on a small runtime of its own so that exporting
//! never takes the server's threads.
//!
//! A request's span takes the caller's W3C `traceparent`/`tracestate` as its parent, so one
//! trace runs from the caller's service through Vivarium. Spans carry ids, kinds, tenants and
//! figures, never code, output, headers, bodies or secrets. With no endpoint no exporter or
//! layer exists: spans are `tracing`'s alone, which the log filter already decides on.

use std::time::Duration;

use anyhow::Context as _;
use axum::http::HeaderMap;
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// OTLP's transports (`--otel-protocol`, `OTEL_EXPORTER_OTLP_PROTOCOL`), named as the
/// OpenTelemetry specification names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OtlpProtocol {
    /// Protobuf over HTTP, `POST {endpoint}/v1/traces` (the collector's port 4318).
    #[value(name = "http/protobuf")]
    HttpProtobuf,
    /// gRPC over HTTP/2 (the collector's port 4317).
    #[value(name = "grpc")]
    Grpc,
}

/// What `--otel-*` say.
#[derive(Debug, Clone)]
pub struct TelemetrySettings {
    /// The collector's base URL (`http://collector:4318`); `None`: no traces.
    pub endpoint: Option<String>,
    /// How spans are sent there.
    pub protocol: OtlpProtocol,
    /// `service.name` of every span.
    pub service_name: String,
    /// Of root traces (no sampled parent), the share kept, 0 to 1.
    pub sample_ratio: f64,
}

/// The exporter's pipeline, flushed at shutdown.
pub struct Telemetry {
    provider: SdkTracerProvider,
    /// gRPC's client and its connection live here (the batch exporter's thread waits on
    /// them); dropped after the provider's last flush.
    _grpc_runtime: Option<tokio::runtime::Runtime>,
}

impl Telemetry {
    /// The pipeline `settings` ask for, and the `tracing` layer that feeds it; `None` without
    /// an endpoint.
    pub fn start(
        settings: &TelemetrySettings,
    ) -> anyhow::Result<Option<(Telemetry, opentelemetry_sdk::trace::Tracer)>> {
        let Some(endpoint) = settings.endpoint.as_deref().filter(|e| !e.is_empty()) else {
            return Ok(None);
        };
        if !(0.0..=1.0).contains(&settings.sample_ratio) {
            anyhow::bail!("--otel-sample-ratio must be within 0 and 1");
        }
        let timeout = Duration::from_secs(10);
        let (exporter, grpc_runtime) = match settings.protocol {
            OtlpProtocol::HttpProtobuf => {
                let url = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
                let exporter = opentelemetry_otlp::SpanExporter::builder()
                    .with_http()
                    .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                    .with_endpoint(&url)
                    .with_timeout(timeout)
                    .build();
                (exporter, None)
            }
            OtlpProtocol::Grpc => {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .thread_name("vivarium-otlp")
                    .enable_all()
                    .build()
                    .context("starting the OTLP exporter's runtime")?;
                // tonic's channel is made (lazily connected) on the runtime it is built in.
                let exporter = runtime.block_on(async {
                    opentelemetry_otlp::SpanExporter::builder()
                        .with_tonic()
                        .with_endpoint(endpoint)
                        .with_timeout(timeout)
                        .build()
                });
                (exporter, Some(runtime))
            }
        };
        let exporter = exporter.with_context(|| format!("--otel-endpoint {endpoint}"))?;
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
                settings.sample_ratio,
            ))))
            .with_resource(
                opentelemetry_sdk::Resource::builder()
                    .with_service_name(settings.service_name.clone())
                    .build(),
            )
            .build();
        let tracer = provider.tracer("vivarium");
        let telemetry = Telemetry {
            provider,
            _grpc_runtime: grpc_runtime,
        };
        Ok(Some((telemetry, tracer)))
    }

    /// Sends what is batched and stops the pipeline.
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::warn!(error = %e, "the trace exporter did not flush at shutdown");
        }
    }
}

/// Makes the caller's W3C trace context (`traceparent`, `tracestate` in `headers`) the parent
/// of `span`; nothing when there is none, or no exporter.
pub fn follow_caller(span: &tracing::Span, headers: &HeaderMap) {
    let get = |k: &str| headers.get(k).and_then(|v| v.to_str().ok());
    follow(span, get("traceparent"), get("tracestate"));
}

/// [`follow_caller`] for a trace context carried elsewhere (MCP's `_meta`).
pub fn follow(span: &tracing::Span, traceparent: Option<&str>, tracestate: Option<&str>) {
    let Some(traceparent) = traceparent else {
        return;
    };
    let cx = TraceContextPropagator::new().extract(&TraceContext {
        traceparent,
        tracestate,
    });
    let _ = span.set_parent(cx);
}

struct TraceContext<'a> {
    traceparent: &'a str,
    tracestate: Option<&'a str>,
}

impl Extractor for TraceContext<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        match key {
            "traceparent" => Some(self.traceparent),
            "tracestate" => self.tracestate,
            _ => None,
        }
    }

    fn keys(&self) -> Vec<&str> {
        vec!["traceparent", "tracestate"]
    }
}
