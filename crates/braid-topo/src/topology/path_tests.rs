use super::*;

#[derive(Debug, Deserialize)]
#[allow(dead_code)]
struct Outer {
    topology: TopologySpec,
}

fn outer(j: &str) -> String {
    let de = &mut serde_json::Deserializer::from_str(j);
    match serde_path_to_error::deserialize::<_, Outer>(de) {
        Ok(_) => "ok".into(),
        Err(e) => format!("{}: {}", e.path(), e.inner()),
    }
}

#[test]
fn errors_inside_the_table_keep_their_path() {
    let e = outer(
        r#"{"topology":{"kind":"leaf-spine","spines":2,"leaves":2,"hosts_per_leaf":2,"host_link":{"rate":"1Gbps","delay":"1"},"fabric_link":{"rate":"1Gbps","delay":"1us"}}}"#,
    );
    assert!(
        e.starts_with("topology.host_link.delay: expected a duration like \"1us\""),
        "{e}"
    );
    // The tag need not come first.
    let e = outer(
        r#"{"topology":{"spines":2,"kind":"leaf-spine","leaves":2,"hosts_per_leaf":2,"host_link":{"rate":"1Gbps","delay":"1us"},"fabric_link":{"rate":"1Gbps","delay":"1us","loss":"x"}}}"#,
    );
    assert!(e.starts_with("topology.fabric_link.loss:"), "{e}");
    let e = outer(
        r#"{"topology":{"host_link":{"rate":"1Gbps","delay":"1"},"kind":"two-tor","hosts_per_tor":1,"paths":1,"fabric_link":{"rate":"1Gbps","delay":"1us"}}}"#,
    );
    assert!(
        e.starts_with("topology") && e.contains("host_link") && e.contains("expected a duration"),
        "{e}"
    );
    let e = outer(r#"{"topology":{"spines":2}}"#);
    assert!(e.contains("missing field `kind`"), "{e}");
    let e = outer(r#"{"topology":{"kind":"ring"}}"#);
    assert!(
        e.starts_with("topology")
            && e.contains("unknown variant `ring`")
            && e.contains("leaf-spine"),
        "{e}"
    );
    let e = outer(r#"{"topology":{"kind":"hpcc","file":"x","color":"red"}}"#);
    assert!(
        e.starts_with("topology") && e.contains("unknown field `color`"),
        "{e}"
    );
    let e = outer(r#"{"topology":{"kind":"hpcc"}}"#);
    assert!(e.contains("missing field `file`"), "{e}");
    assert_eq!(outer(r#"{"topology":{"kind":"hpcc","file":"x"}}"#), "ok");
    let e = outer(r#"{"topology":"fat-tree"}"#);
    assert!(e.contains("expected a topology table"), "{e}");
}
