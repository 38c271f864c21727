//! The scenario file's schema (one serde/JSON-Schema definition), its validation, and building a
//! world from it.

use crate::api::ScenarioError;
use crate::cc::CcFactory;
use crate::config::*;
use braid_topo::topology::TopologySpec;
use braid_topo::traffic::TrafficSpec;
use braid_topo::units::Duration;
use schemars::JsonSchema;
use serde::de::value::MapAccessDeserializer;
use serde::de::{DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};

pub(crate) mod wording;

/// A braid scenario: a topology, the models' parameters, traffic and applications.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Free text.
    #[serde(default)]
    pub name: String,
    /// Default seed (the command line may override it).
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Simulated-time limit; the run also ends once all traffic and applications are done.
    pub duration: Duration,
    pub topology: TopologySpec,
    #[serde(default)]
    pub switch: SwitchConfig,
    #[serde(default)]
    pub nic: NicConfig,
    #[serde(default)]
    pub transport: TransportConfig,
    #[serde(default)]
    pub traffic: Vec<TrafficEntry>,
    #[serde(default)]
    pub apps: Vec<AppEntry>,
    #[serde(default)]
    pub link_events: Vec<LinkEvent>,
    /// Static routes overriding shortest-path ECMP at chosen switches.
    #[serde(default)]
    pub routes: Vec<StaticRoute>,
    #[serde(default)]
    pub measure: MeasureConfig,
    #[serde(default)]
    pub middleware: MiddlewareConfig,
    /// The hosts' CPUs (cost model of verbs calls and middleware work).
    #[serde(default)]
    pub host: HostConfig,
}

fn default_seed() -> u64 {
    1
}

fn err(path: impl Into<String>, message: impl Into<String>) -> ScenarioError {
    ScenarioError {
        path: path.into(),
        message: message.into(),
    }
}

impl Scenario {
    /// Parses a scenario from JSON, naming the key path of the first error and saying what was
    /// expected in the scenario's terms (`scenario/wording.rs`).
    pub fn from_json(json: &str) -> Result<Scenario, ScenarioError> {
        let de = &mut serde_json::Deserializer::from_str(json);
        let s: Scenario = serde_path_to_error::deserialize(de)
            .map_err(|e| {
                let path = e.path().to_string();
                let path = if path == "." { String::new() } else { path };
                err(path, e.into_inner().to_string())
            })
            .map_err(|e| wording::in_document(json, e))?;
        s.validate().map_err(|e| wording::in_document(json, e))?;
        Ok(s)
    }

    /// Range checks the types cannot express.
    pub fn validate(&self) -> Result<(), ScenarioError> {
        if self.duration.0 == 0 {
            return Err(err("duration", "must be positive, e.g. \"10ms\""));
        }
        let sw = &self.switch;
        if !(1..=8).contains(&sw.priorities) {
            return Err(err("switch.priorities", "expected 1 to 8 priority queues"));
        }
        for (i, p) in sw.lossless.iter().enumerate() {
            if *p >= sw.priorities {
                return Err(err(
                    format!("switch.lossless[{i}]"),
                    format!(
                        "priority {p} does not exist (switch.priorities = {})",
                        sw.priorities
                    ),
                ));
            }
        }
        // A quantum list is per priority: a shorter one would leave the last priorities on an
        // unstated default, a longer one names priorities that do not exist.
        if !sw.dwrr_quantum.is_empty() && sw.dwrr_quantum.len() != sw.priorities as usize {
            return Err(err(
                "switch.dwrr_quantum",
                format!(
                    "expected one quantum per priority ({} values, switch.priorities = {}), got {}",
                    sw.priorities,
                    sw.priorities,
                    sw.dwrr_quantum.len()
                ),
            ));
        }
        if sw.scheduler == Scheduler::Dwrr {
            for (i, q) in sw.dwrr_quantum.iter().enumerate() {
                if *q == 0 {
                    return Err(err(
                        format!("switch.dwrr_quantum[{i}]"),
                        "quantum must be at least 1 byte",
                    ));
                }
            }
        }
        if sw.buffer.0 == 0 {
            return Err(err("switch.buffer", "must be positive, e.g. \"12MB\""));
        }
        let check_curve =
            |path: &str, kmin: u64, kmax: u64, pmax: f64| -> Result<(), ScenarioError> {
                if !(0.0..=1.0).contains(&pmax) || pmax.is_nan() {
                    return Err(err(
                        format!("{path}.pmax"),
                        "expected a probability between 0 and 1",
                    ));
                }
                if kmin > kmax {
                    return Err(err(format!("{path}.kmin"), "must not exceed kmax"));
                }
                Ok(())
            };
        check_curve("switch.ecn", sw.ecn.kmin.0, sw.ecn.kmax.0, sw.ecn.pmax)?;
        for (i, c) in sw.ecn.by_rate.iter().enumerate() {
            check_curve(
                &format!("switch.ecn.by_rate[{i}]"),
                c.kmin.0,
                c.kmax.0,
                c.pmax,
            )?;
        }
        for (i, c) in sw.ecn.by_port.iter().enumerate() {
            check_curve(
                &format!("switch.ecn.by_port[{i}]"),
                c.kmin.0,
                c.kmax.0,
                c.pmax,
            )?;
        }
        let pfc = &sw.pfc;
        if !pfc.dynamic && pfc.xon.0 > pfc.xoff.0 {
            return Err(err("switch.pfc.xon", "must not exceed switch.pfc.xoff"));
        }
        if !(pfc.alpha > 0.0 && pfc.alpha <= 64.0) {
            return Err(err(
                "switch.pfc.alpha",
                "expected a positive factor (e.g. 0.125)",
            ));
        }
        let nic = &self.nic;
        if !(64..=65536).contains(&nic.mtu) {
            return Err(err(
                "nic.mtu",
                "expected a payload size between 64 and 65536 bytes",
            ));
        }
        if nic.ack_every == 0 {
            return Err(err(
                "nic.ack_every",
                "expected at least 1 (1 = ACK every packet)",
            ));
        }
        if nic.priority >= sw.priorities {
            return Err(err(
                "nic.priority",
                format!(
                    "priority {} does not exist (switch.priorities = {})",
                    nic.priority, sw.priorities
                ),
            ));
        }
        if nic.rto.0 == 0 {
            return Err(err("nic.rto", "must be positive, e.g. \"4ms\""));
        }
        if nic
            .initial_psn
            .is_some_and(|v| v > crate::transport::psn::PSN_MASK)
        {
            return Err(err(
                "nic.initial_psn",
                "expected a 24-bit PSN, 0..=16777215 (or leave it out: drawn per QP from the seed)",
            ));
        }
        if nic.addresses == 0 {
            return Err(err(
                "nic.addresses",
                "expected at least 1 address per host (1..=255)",
            ));
        }
        if nic.ets_weights.len() > 8 {
            return Err(err(
                "nic.ets_weights",
                format!(
                    "expected at most 8 weights (classes 0-7), got {}",
                    nic.ets_weights.len()
                ),
            ));
        }
        for (i, w) in nic.ets_weights.iter().enumerate() {
            if !(*w > 0.0 && w.is_finite()) {
                return Err(err(
                    format!("nic.ets_weights[{i}]"),
                    "expected a positive weight (e.g. 16 and 1 for a 16:1 share)",
                ));
            }
        }
        for (k, v) in [
            ("nic.max_msg_rate", nic.max_msg_rate),
            ("nic.max_qp_msg_rate", nic.max_qp_msg_rate),
        ] {
            if !(v >= 0.0 && v.is_finite()) {
                return Err(err(k, "expected messages per second >= 0 (0 = unlimited)"));
            }
        }
        nic.mtt.validate().map_err(|(k, m)| err(k, m))?;
        check_transport("transport", &self.transport, self.nic.ack_every)?;
        // Transport overrides: each is resolved (its keys over the ones it inherits) and checked
        // like the full table, errors naming the override's own key path.
        for (h, o) in &self.transport.per_host {
            let p = format!("transport.per_host.{h}");
            if h.parse::<u32>().is_err() {
                return Err(err(p, "keys are host indices, e.g. \"3\""));
            }
            let t = self
                .transport
                .overridden(Some(o))
                .map_err(|(rel, m)| err(join(&p, &rel), m))?;
            check_transport(&p, &t, self.nic.ack_every)?;
        }
        for (i, t) in self.traffic.iter().enumerate() {
            if t.transport.is_some() {
                // Per-host keys combine with it per flow, once the flows exist (Simulation::build).
                self.transport_for(
                    None,
                    t.transport.as_ref(),
                    &format!("traffic[{i}].transport"),
                )?;
            }
        }
        for (i, a) in self.apps.iter().enumerate() {
            let p = format!("apps[{i}]");
            if a.src == a.dst {
                return Err(err(format!("{p}.dst"), "must differ from src"));
            }
            let c = a.spec.common();
            c.validate(a.kind().is_attacker())
                .map_err(|e| err(format!("{p}.{}", e.key), e.message))?;
            if let Some(pr) = c.priority {
                if pr >= sw.priorities {
                    return Err(err(
                        format!("{p}.priority"),
                        format!(
                            "priority {pr} does not exist (switch.priorities = {})",
                            sw.priorities
                        ),
                    ));
                }
            }
            self.transport_for(Some(a.src), a.transport.as_ref(), &format!("{p}.transport"))?;
            // A key only other kinds take, then the kind's own checks: the kind's config's.
            a.check()
                .map_err(|e| err(format!("{p}.{}", e.key), e.message))?;
            self.validate_victim(i, a, &p)?;
        }
        if crate::net::int::wanted(self) {
            if let Some((key, kind)) = crate::net::int::per_packet_lb(self) {
                // HPCC compares each hop's INT record with the previous ACK's of the same hop.
                return Err(err(
                    key,
                    format!("\"{kind}\" sends one flow's packets on different paths, whose INT records HPCC (transport.cc.kind = \"hpcc\") cannot compare: expected \"ecmp\", \"wcmp\" or \"flowlet\" with it"),
                ));
            }
        }
        self.measure.validate().map_err(|e| e.under("measure"))?;
        self.middleware
            .validate()
            .map_err(|e| e.under("middleware"))?;
        self.host.validate().map_err(|e| e.under("host"))?;
        Ok(())
    }
}

impl Scenario {
    /// The transport of a connection initiated by host `src` (a flow's or an application's
    /// `src`) for a tenant with override `own`: `[transport]`, then `transport.per_host.<src>`,
    /// then `own`, each replacing the keys it sets. `path` names `own` in errors.
    pub fn transport_for(
        &self,
        src: Option<u32>,
        own: Option<&TransportOverride>,
        path: &str,
    ) -> Result<TransportConfig, ScenarioError> {
        let host = src.and_then(|h| self.transport.per_host.get(&h.to_string()));
        let base = match host {
            Some(o) => {
                let p = format!("transport.per_host.{}", src.unwrap_or_default());
                self.transport
                    .overridden(Some(o))
                    .map_err(|(rel, m)| err(join(&p, &rel), m))?
            }
            None => self.transport.overridden(None).expect("no override"),
        };
        if own.is_none() {
            return Ok(base);
        }
        let t = base
            .overridden(own)
            .map_err(|(rel, m)| err(join(path, &rel), m))?;
        check_transport(path, &t, self.nic.ack_every)?;
        Ok(t)
    }
}

fn join(prefix: &str, rel: &str) -> String {
    if rel.is_empty() {
        prefix.to_string()
    } else {
        format!("{prefix}.{rel}")
    }
}

/// Range checks of one transport table (`path` names it: `transport`, `apps[2].transport`, ...).
/// `ack_every` is `nic.ack_every`, which MP-RDMA cannot honour.
fn check_transport(path: &str, t: &TransportConfig, ack_every: u32) -> Result<(), ScenarioError> {
    let at = |k: &str| format!("{path}.{k}");
    if t.kind == TransportKind::MpRdma && ack_every != 1 {
        // Each MP-RDMA ACK clocks the next packet onto the path it echoes and SACKs the one
        // packet that triggered it (NSDI'18 §3.2, Fig. 3): coalesced ACKs would lose both. The
        // key is refused rather than silently ignored.
        return Err(err(
            "nic.ack_every",
            format!("expected 1 with {path}.kind = \"mp-rdma\" (MP-RDMA ACKs every packet)"),
        ));
    }
    if t.recovery == Recovery::Irn {
        if t.kind == TransportKind::MpRdma {
            return Err(err(
                at("recovery"),
                "expected \"go-back-n\" with kind = \"mp-rdma\" (MP-RDMA has its own recovery)",
            ));
        }
        let i = &t.irn;
        if i.rto_low.0 == 0 || i.rto_low.0 > i.rto_high.0 {
            return Err(err(
                at("irn.rto_low"),
                "expected a positive duration no longer than irn.rto_high, e.g. \"100us\"",
            ));
        }
        if i.low_threshold == 0 {
            return Err(err(at("irn.low_threshold"), "expected at least 1 packet"));
        }
        if i.bdp.map_or(i.bdp_rtt.0 == 0, |b| b.0 == 0) {
            return Err(err(
                at("irn.bdp_rtt"),
                "expected a positive duration (or irn.bdp a positive size), e.g. \"24us\"",
            ));
        }
    }
    t.dcqcn
        .check()
        .map_err(|(k, m)| err(at(&format!("dcqcn.{k}")), m))?;
    if let Some(c) = &t.cc {
        if t.kind != TransportKind::Dcqcn {
            // MP-RDMA runs its own window (NSDI'18 §3.3) and "none" runs at line rate: a
            // controller there would be silently ignored.
            return Err(err(
                at("cc"),
                format!(
                    "is for RC QPs: expected {path}.kind = \"dcqcn\" (or \"rc\") with it, or no {path}.cc"
                ),
            ));
        }
        c.kind()
            .check()
            .map_err(|(k, m)| err(at(&format!("cc.{k}")), m))?;
    }
    let m = &t.mp_rdma;
    // Up to 2^16 slots: enough for an "infinite" bitmap in the paper's worst case (99.9th OOD of
    // 5324 with a 1G path and no OOO control, §5.2.1).
    if m.bitmap == 0 || m.bitmap > 65536 {
        return Err(err(at("mp_rdma.bitmap"), "expected 1..=65536 slots"));
    }
    if m.delta > m.bitmap {
        return Err(err(
            at("mp_rdma.delta"),
            "must not exceed the bitmap length L (0 = no OOO control)",
        ));
    }
    if m.iw == Some(0) || (m.iw.is_none() && m.bdp.0 == 0) {
        return Err(err(at("mp_rdma.iw"), "expected at least 1 packet"));
    }
    if !(0.0..=1.0).contains(&m.probe_p) {
        return Err(err(
            at("mp_rdma.probe_p"),
            "expected a probability in [0, 1]",
        ));
    }
    if m.max_per_ack == 0 {
        return Err(err(at("mp_rdma.max_per_ack"), "expected at least 1"));
    }
    let positive = |x: f64| x > 0.0 && x.is_finite();
    if !(positive(m.burst_rtt_frac)
        && positive(m.restart_rtts)
        && m.alpha >= 0.0
        && m.alpha.is_finite())
    {
        return Err(err(
            at("mp_rdma"),
            "burst_rtt_frac and restart_rtts must be positive, alpha >= 0",
        ));
    }
    if m.vp_min > m.vp_max || m.initial_rtt.0 == 0 {
        return Err(err(
            at("mp_rdma.vp_min"),
            "expected vp_min <= vp_max and a positive initial_rtt",
        ));
    }
    Ok(())
}

/// One `[[traffic]]` table: a traffic pattern (`braid_topo`'s [`TrafficSpec`], every key but one)
/// and `transport`, the transport its connections run (a tenant's partial `[transport]` table).
/// The pattern crate knows nothing of transports, so the key is taken out here, before the rest
/// of the table is handed (unbuffered: key paths survive) to the pattern's own deserialiser.
#[derive(Debug, Clone, PartialEq)]
pub struct TrafficEntry {
    pub spec: TrafficSpec,
    pub transport: Option<TransportOverride>,
    /// This table's verbs stack (it is a tenant of each host it sends from or to).
    pub middleware: Option<Vec<braid_middleware::MiddlewareEntry>>,
}

impl From<TrafficSpec> for TrafficEntry {
    fn from(spec: TrafficSpec) -> Self {
        TrafficEntry {
            spec,
            transport: None,
            middleware: None,
        }
    }
}

/// A map without its `transport` and `middleware` entries, which it keeps aside.
struct WithoutTransport<A> {
    map: A,
    transport: Option<TransportOverride>,
    middleware: Option<Vec<braid_middleware::MiddlewareEntry>>,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for WithoutTransport<A> {
    type Error = A::Error;
    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        loop {
            match self.map.next_key::<String>()? {
                None => return Ok(None),
                Some(k) if k == "transport" => self.transport = Some(self.map.next_value()?),
                Some(k) if k == "middleware" => self.middleware = Some(self.map.next_value()?),
                Some(k) => {
                    return seed
                        .deserialize(IntoDeserializer::<A::Error>::into_deserializer(k))
                        .map(Some)
                }
            }
        }
    }
    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(seed)
    }
}

impl<'de> Deserialize<'de> for TrafficEntry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = TrafficEntry;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a traffic table with `pattern`")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<TrafficEntry, A::Error> {
                let mut rest = WithoutTransport {
                    map,
                    transport: None,
                    middleware: None,
                };
                let spec = TrafficSpec::deserialize(MapAccessDeserializer::new(&mut rest))?;
                Ok(TrafficEntry {
                    spec,
                    transport: rest.transport,
                    middleware: rest.middleware,
                })
            }
        }
        d.deserialize_map(V)
    }
}

impl Serialize for TrafficEntry {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut v = serde_json::to_value(&self.spec).map_err(serde::ser::Error::custom)?;
        if let (Some(t), Some(obj)) = (&self.transport, v.as_object_mut()) {
            obj.insert(
                "transport".into(),
                serde_json::to_value(t).map_err(serde::ser::Error::custom)?,
            );
        }
        if let (Some(m), Some(obj)) = (&self.middleware, v.as_object_mut()) {
            obj.insert(
                "middleware".into(),
                serde_json::to_value(m).map_err(serde::ser::Error::custom)?,
            );
        }
        v.serialize(s)
    }
}

impl JsonSchema for TrafficEntry {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "TrafficEntry".into()
    }
    /// The pattern's schema with `transport` added to every variant.
    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut s = TrafficSpec::json_schema(g);
        let t = serde_json::to_value(g.subschema_for::<TransportOverride>())
            .expect("schema serialises");
        let m = serde_json::to_value(g.subschema_for::<Vec<braid_middleware::MiddlewareEntry>>())
            .expect("schema serialises");
        for key in ["oneOf", "anyOf"] {
            if let Some(variants) = s.get_mut(key).and_then(|v| v.as_array_mut()) {
                for v in variants {
                    if let Some(props) = v.get_mut("properties").and_then(|p| p.as_object_mut()) {
                        props.insert("transport".into(), t.clone());
                        props.insert("middleware".into(), m.clone());
                    }
                }
            }
        }
        s
    }
}

/// The scenario schema as JSON Schema.
pub fn json_schema() -> String {
    let schema = schemars::schema_for!(Scenario);
    serde_json::to_string_pretty(&schema).expect("schema serialises")
}

impl Scenario {
    /// An attacker's `victim` (a key its kind took): an enabled app other than itself and not
    /// an attacker.
    fn validate_victim(&self, i: usize, a: &AppEntry, p: &str) -> Result<(), ScenarioError> {
        let Some(v) = a.spec.config().victim() else {
            return Ok(());
        };
        let ok = self
            .apps
            .get(v as usize)
            .is_some_and(|t| v as usize != i && t.enabled && !t.kind().is_attacker());
        if !ok {
            return Err(err(
                format!("{p}.victim"),
                format!(
                    "expected the index of another enabled, non-attacker [[apps]] entry (0..{})",
                    self.apps.len()
                ),
            ));
        }
        Ok(())
    }
}
