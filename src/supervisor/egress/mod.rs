//! Network by exception, the performer: each outbound request a run's guest makes arrives
//! here (from its worker, which has no network, as `worker::Event::Egress`), is checked
//! again in full (the run's [`Network`] grant, the method, the sizes, the count, the time
//! left), gets the run's secrets put in for their own hosts only, and is performed with one
//! shared reqwest client: rustls with certificate verification always on (the machine's
//! roots and the operator's `--egress-ca-bundle`), no proxy, no redirects followed (the
//! guest's client follows them, each hop a request checked here), names resolved by
//! [`resolve::CheckedResolver`] so the connection goes only to checked addresses. The
//! response is read up to `response_bytes`, decoded when compressed, has every secret's
//! value replaced by its placeholder, and goes back as raw HTTP/1.1. Each request, performed
//! or refused, is one audit line and one count per tenant, host and outcome.

mod operator;
mod perform;
mod resolve;
mod shown;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::audit::{Audit, AuditRecord};
use crate::egress::{AddressRules, AllowList, EgressLimits, Network, Refused, Secrets};
use crate::hostcalls::egress::EgressAsker;
use crate::report::{NetworkRefusal, NetworkUsage};
use crate::sync::lock;

pub use operator::OperatorSecrets;
pub use resolve::{CheckedResolver, TestAnswers};
use tracing::Instrument as _;

/// Refusals a run's result lists at most.
const LISTED_REFUSALS: usize = 16;
/// Distinct (tenant, host, outcome) counts kept; past it, new hosts count as `other`.
const MAX_SERIES: usize = 4096;

/// The operator's egress settings.
#[derive(Debug, Default)]
pub struct EgressSettings {
    /// `--egress-allow`: empty, no run has network.
    pub allow: AllowList,
    /// `--egress-allow-private`.
    pub addresses: AddressRules,
    /// The bounds of every run's requests.
    pub limits: EgressLimits,
    /// `--egress-ca-bundle`: more roots, beside the machine's.
    pub ca_bundle: Option<PathBuf>,
    /// `--egress-test-resolve` (tests only).
    pub test_resolve: Option<TestAnswers>,
    /// `--egress-secrets-file`: secrets a request names instead of sending.
    pub operator_secrets: OperatorSecrets,
}

/// The performer: the client, the settings, the counts.
pub struct Egress {
    allow: AllowList,
    limits: EgressLimits,
    addresses: AddressRules,
    operator_secrets: OperatorSecrets,
    client: reqwest::Client,
    /// (tenant, host, outcome) -> requests.
    counts: Mutex<BTreeMap<(String, String, &'static str), u64>>,
}

impl std::fmt::Debug for Egress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Egress")
            .field("allow", &self.allow)
            .field("limits", &self.limits)
            .field("addresses", &self.addresses)
            .finish_non_exhaustive()
    }
}

impl Egress {
    /// The performer for `settings`; a CA bundle that does not read is an error.
    pub fn new(settings: EgressSettings) -> anyhow::Result<Egress> {
        let mut builder = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_millis(settings.limits.request_timeout_ms))
            .pool_idle_timeout(Duration::from_secs(30))
            .user_agent(concat!("vivarium/", env!("CARGO_PKG_VERSION")))
            .dns_resolver(Arc::new(resolve::CheckedResolver {
                rules: settings.addresses.clone(),
                test: settings.test_resolve,
            }));
        if let Some(path) = &settings.ca_bundle {
            let pem = std::fs::read(path).map_err(|e| {
                anyhow::anyhow!("reading --egress-ca-bundle {}: {e}", path.display())
            })?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| anyhow::anyhow!("--egress-ca-bundle {}: {e}", path.display()))?;
            if certs.is_empty() {
                anyhow::bail!("--egress-ca-bundle {} holds no certificate", path.display());
            }
            for c in certs {
                builder = builder.add_root_certificate(c);
            }
        }
        Ok(Egress {
            allow: settings.allow,
            limits: settings.limits,
            addresses: settings.addresses,
            operator_secrets: settings.operator_secrets,
            client: builder.build()?,
            counts: Mutex::new(BTreeMap::new()),
        })
    }

    /// The grant of a run whose request narrowed the allow list to `narrowed` (`None`: the
    /// operator's list as it is): `None` when the operator allows no host.
    pub fn grant(&self, narrowed: Option<AllowList>) -> Option<Network> {
        (!self.allow.is_empty()).then(|| Network {
            server: self.allow.clone(),
            narrowed,
            limits: self.limits,
        })
    }

    /// The value and hosts of the operator's secret `name` for the caller holding `key`,
    /// when it may use it.
    pub fn operator_secret(&self, name: &str, key: Option<&str>) -> Option<(String, Vec<String>)> {
        self.operator_secrets.get(name, key)
    }

    /// Who performs `run`'s requests: each on the runtime, its audit line to `audit`.
    pub fn asker(self: &Arc<Self>, run: Arc<RunEgress>, audit: Arc<Audit>) -> EgressAsker {
        let this = self.clone();
        let rt = tokio::runtime::Handle::current();
        // Each request's span is a child of the run's (its request's trace).
        let parent = tracing::Span::current();
        Arc::new(move |request| {
            let (tx, rx) = std::sync::mpsc::channel();
            let (this, run, audit) = (this.clone(), run.clone(), audit.clone());
            let span = tracing::info_span!(
                parent: &parent,
                "egress.request",
                otel.kind = "client",
                server.port = request.port,
                server.address = tracing::field::Empty,
                http.response.status_code = tracing::field::Empty,
                vivarium.refused = tracing::field::Empty,
                vivarium.bytes_sent = tracing::field::Empty,
                vivarium.bytes_received = tracing::field::Empty,
            );
            rt.spawn(
                async move {
                    let (answer, held) = this.perform(&run, request, &audit).await;
                    let _ = tx.send(serde_json::to_string(&answer).unwrap_or_default());
                    // The response's copies were charged until they were handed on.
                    drop(held);
                }
                .instrument(span),
            );
            rx
        })
    }

    /// Counts a request of `run` to `host` (as shown: [`RunEgress::shown_host`]) and `port`
    /// under `outcome`.
    fn count(&self, run: &RunEgress, host: &str, port: u16, outcome: &'static str) {
        // A label is no program's unchecked word: only a host name or an address (`"` or a
        // newline would forge a line) that matched the run's allow list, and with no
        // secret's value in it (a redacted host is no host name); any other counts as `-`.
        let host = if crate::egress::valid_host(host) && run.network.permits(host, port) {
            host
        } else {
            "-"
        };
        let tenant = run.tenant.as_str();
        let mut counts = lock(&self.counts);
        let key = (tenant.to_string(), host.to_string(), outcome);
        if counts.len() >= MAX_SERIES && !counts.contains_key(&key) {
            *counts
                .entry((tenant.to_string(), "other".into(), outcome))
                .or_default() += 1;
            return;
        }
        *counts.entry(key).or_default() += 1;
    }

    /// `vivarium_egress_requests_total{tenant,host,outcome}` in Prometheus' text format.
    pub fn render(&self, out: &mut String) {
        use std::fmt::Write as _;
        let _ = writeln!(
            out,
            "# HELP vivarium_egress_requests_total Outbound HTTP requests of guests, by tenant, host and outcome (a status class or a refusal).\n# TYPE vivarium_egress_requests_total counter"
        );
        for ((tenant, host, outcome), n) in lock(&self.counts).iter() {
            let _ = writeln!(
                out,
                "vivarium_egress_requests_total{{tenant=\"{tenant}\",host=\"{host}\",outcome=\"{outcome}\"}} {n}"
            );
        }
    }
}

/// One run's network: its grant, its secrets (their values live only here), whose it is, and
/// what it has used.
pub struct RunEgress {
    network: Network,
    secrets: Secrets,
    /// The secrets' values, looked for in every host the run names before it is shown.
    scrub: shown::HostScrub,
    /// What a response is charged to while it crosses to the guest.
    budget: Arc<crate::budget::HostBudget>,
    /// The run's audit record as it started (request id, key, door, client).
    record: AuditRecord,
    tenant: String,
    usage: Mutex<Usage>,
}

#[derive(Default)]
struct Usage {
    report: NetworkUsage,
    spent: Duration,
}

impl RunEgress {
    /// The network of a run of `tenant` (its name, as every metric names it) granted
    /// `network`, with `secrets`, audited as `record`'s, its responses charged to `budget`
    /// while they cross to the guest.
    pub fn new(
        network: Network,
        secrets: Secrets,
        tenant: &str,
        record: &AuditRecord,
        budget: Arc<crate::budget::HostBudget>,
    ) -> RunEgress {
        // The run's identity only: who, which request, which execution.
        let record = AuditRecord {
            action: super::audit::Action::Egress,
            http_status: 0,
            request_id: record.request_id.clone(),
            key_id: record.key_id.clone(),
            client: record.client.clone(),
            door: record.door,
            execution_id: record.execution_id.clone(),
            session_id: record.session_id.clone(),
            ..AuditRecord::internal(super::audit::Action::Egress)
        };
        RunEgress {
            network,
            scrub: shown::HostScrub::new(&secrets),
            secrets,
            budget,
            tenant: tenant.to_string(),
            record,
            usage: Mutex::new(Usage::default()),
        }
    }

    /// What the run's requests did, for its result.
    pub fn usage(&self) -> NetworkUsage {
        lock(&self.usage).report.clone()
    }

    /// `host`, a request's, as the run's result, its audit line and its count may show it:
    /// each of the run's secrets' values redacted, cut to a length.
    fn shown_host(&self, host: &str) -> String {
        self.scrub.shown(host)
    }

    /// Lists a refusal of a request to `host` (as shown: [`RunEgress::shown_host`]).
    fn refused(&self, host: &str, port: u16, reason: Refused) {
        let mut u = lock(&self.usage);
        u.report.refused += 1;
        if u.report.refusals.len() < LISTED_REFUSALS {
            u.report.refusals.push(NetworkRefusal {
                host: host.to_string(),
                port,
                reason,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_of(tenant: &str, secrets: Secrets) -> RunEgress {
        let allow = AllowList::parse_csv("api.test,*.wild.test").unwrap();
        RunEgress::new(
            Network {
                server: allow,
                narrowed: None,
                limits: EgressLimits::default(),
            },
            secrets,
            tenant,
            &AuditRecord::internal(super::super::audit::Action::Egress),
            crate::budget::HostBudget::unlimited(),
        )
    }

    fn egress() -> Egress {
        Egress::new(EgressSettings {
            allow: AllowList::parse_csv("api.test,*.wild.test").unwrap(),
            ..EgressSettings::default()
        })
        .unwrap()
    }

    #[test]
    fn a_host_the_program_made_up_is_no_label() {
        let egress = egress();
        let run = run_of("t", Secrets::default());
        egress.count(&run, "api.test", 443, "2xx");
        egress.count(&run, "x\"} 1\nvivarium_forged 9", 443, "bad_request");
        // A host name refused before the allow list was asked (past the run's count) is
        // still the program's word.
        egress.count(&run, "made-up.test", 443, "too_many_requests");
        let mut out = String::new();
        egress.render(&mut out);
        assert!(
            out.contains("tenant=\"t\",host=\"api.test\",outcome=\"2xx\"} 1"),
            "{out}"
        );
        assert!(
            out.contains("host=\"-\",outcome=\"bad_request\"} 1"),
            "{out}"
        );
        assert!(
            out.contains("host=\"-\",outcome=\"too_many_requests\"} 1"),
            "{out}"
        );
        assert!(!out.contains("vivarium_forged"), "{out}");
        assert!(!out.contains("made-up"), "{out}");
    }

    #[test]
    fn a_secret_spelt_into_a_host_is_shown_nowhere() {
        let value = "Tok0A1b2C3d4e5";
        let secrets = Secrets::new(vec![(
            "TOKEN".into(),
            value.into(),
            vec!["api.test".into()],
        )])
        .unwrap();
        let egress = egress();
        let run = run_of("acme", secrets);
        // Hosts arrive in lower case; the allow list's wildcard lets this one through.
        let host = format!("{}.wild.test", value.to_ascii_lowercase());
        let shown = run.shown_host(&host);
        assert_eq!(shown, "[REDACTED:secret:TOKEN].wild.test");
        run.refused(&shown, 443, Refused::AddressNotAllowed);
        egress.count(&run, &shown, 443, "address_not_allowed");
        let mut out = String::new();
        egress.render(&mut out);
        let listed = serde_json::to_string(&run.usage()).unwrap();
        for text in [&out, &listed] {
            assert!(
                !text
                    .to_ascii_lowercase()
                    .contains(&value.to_ascii_lowercase()),
                "{text}"
            );
        }
        assert!(
            listed.contains("[REDACTED:secret:TOKEN].wild.test"),
            "{listed}"
        );
        assert!(
            out.contains("tenant=\"acme\",host=\"-\",outcome=\"address_not_allowed\"} 1"),
            "{out}"
        );
    }
}
