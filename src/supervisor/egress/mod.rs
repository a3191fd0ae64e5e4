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
pub use resolve::TestAnswers;

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
        Arc::new(move |request| {
            let (tx, rx) = std::sync::mpsc::channel();
            let (this, run, audit) = (this.clone(), run.clone(), audit.clone());
            rt.spawn(async move {
                let (answer, held) = this.perform(&run, request, &audit).await;
                let _ = tx.send(serde_json::to_string(&answer).unwrap_or_default());
                // The response's copies were charged until they were handed on.
                drop(held);
            });
            rx
        })
    }

    fn count(&self, tenant: &str, host: &str, outcome: &'static str) {
        // Only a host name or an address is a label (`"` or a newline would forge a line).
        let host = if crate::egress::valid_host(host) {
            host
        } else {
            "-"
        };
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
    /// The network of a run granted `network`, with `secrets`, audited as `record`'s, its
    /// responses charged to `budget` while they cross to the guest.
    pub fn new(
        network: Network,
        secrets: Secrets,
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
            secrets,
            budget,
            tenant: record.key_id.clone().unwrap_or_else(|| "default".into()),
            record,
            usage: Mutex::new(Usage::default()),
        }
    }

    /// What the run's requests did, for its result.
    pub fn usage(&self) -> NetworkUsage {
        lock(&self.usage).report.clone()
    }

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

    #[test]
    fn a_host_the_program_made_up_is_no_label() {
        let egress = Egress::new(EgressSettings {
            allow: AllowList::parse_csv("api.test").unwrap(),
            ..EgressSettings::default()
        })
        .unwrap();
        egress.count("t", "api.test", "2xx");
        egress.count("t", "x\"} 1\nvivarium_forged 9", "too_many_requests");
        let mut out = String::new();
        egress.render(&mut out);
        assert!(
            out.contains("host=\"api.test\",outcome=\"2xx\"} 1"),
            "{out}"
        );
        assert!(
            out.contains("host=\"-\",outcome=\"too_many_requests\"} 1"),
            "{out}"
        );
        assert!(!out.contains("vivarium_forged"), "{out}");
    }
}
