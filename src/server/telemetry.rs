//! OpenTelemetry traces: off unless an endpoint is given (`--otel-endpoint`, or the
//! standard `OTEL_EXPORTER_OTLP_ENDPOINT`), and then the server's `tracing` spans (a request,
//! its admission, the worker job with the run's status, fuel and peak memory, each outbound
//! request, hibernation and waking, snapshot writes, package resolution) are exported as
//! OTLP over HTTP/protobuf to `{endpoint}/v1/traces`, batched, sampled by
//! `--otel-sample-ratio` (a caller's sampled `traceparent` is followed).
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

/// What `--otel-*` say.
#[derive(Debug, Clone)]
pub struct TelemetrySettings {
    /// The collector's base URL (`http://collector:4318`); `None`: no traces.
    pub endpoint: Option<String>,
    /// `service.name` of every span.
    pub service_name: String,
    /// Of root traces (no sampled parent), the share kept, 0 to 1.
    pub sample_ratio: f64,
}

/// The exporter's pipeline, flushed at shutdown.
pub struct Telemetry {
    provider: SdkTracerProvider,
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
        if let Ok(p) = std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL")
            && p != "http/protobuf"
        {
            anyhow::bail!(
                "OTEL_EXPORTER_OTLP_PROTOCOL={p}: this build exports OTLP over http/protobuf only"
            );
        }
        let url = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_endpoint(&url)
            .with_timeout(Duration::from_secs(10))
            .build()
            .with_context(|| format!("--otel-endpoint {endpoint}"))?;
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
        Ok(Some((Telemetry { provider }, tracer)))
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
