//! The configs operators copy: `sheetq.example.toml` must load as it is, show every setting
//! and state the real defaults; the deploy files must agree with the config they run.

use std::collections::BTreeMap;

use sheetq::config::Config;

const EXAMPLE: &str = include_str!("../sheetq.example.toml");

fn example() -> Config {
    Config::parse(EXAMPLE, "sheetq.example.toml", &BTreeMap::new())
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn the_example_loads_as_it_is() {
    let c = example();
    assert_eq!(c.worker_id, "vm-1");
    assert_eq!(c.state_dir, std::path::Path::new("/var/lib/sheetq"));
    for name in ["sleep", "echo", "report"] {
        assert!(c.commands.contains_key(name), "[commands.{name}] missing");
    }
}

#[test]
fn the_examples_commands_take_any_value_as_data() {
    let registry = sheetq::setup::registry(&example()).unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(
        registry.option_positions(),
        Vec::<String>::new(),
        "an example an operator copies must not put a placeholder where options are read"
    );
}

#[test]
fn the_example_shows_every_setting() {
    let table: toml::Table = toml::from_str(EXAMPLE).unwrap();
    for key in [
        "spreadsheet_id",
        "credentials",
        "api_base_url",
        "worker_id",
        "slots",
        "poll_interval",
        "idle_poll_interval",
        "stale_after",
        "dead_after",
        "heartbeat_interval",
        "lease_ttl",
        "shutdown_grace",
        "intake",
        "state_dir",
        "requests_per_minute",
        "call_timeout",
        "max_retries",
        "sweep_rows",
        "retention",
        "protect",
        "protect_editors",
        "schedules",
    ] {
        assert!(table.contains_key(key), "{key} is not in the example");
    }
    let queue = table["queue"].as_table().unwrap();
    assert_eq!(
        queue["headers"].as_table().unwrap().len(),
        19,
        "every queue header name, 中止要求, 承認 and 入力 included"
    );
    assert_eq!(
        queue["states"].as_table().unwrap().len(),
        9,
        "every state word, 承認待ち, 却下 and 期限切れ included"
    );
}

/// The example writes the defaults out, except where it shows a deployment's own value
/// (the spreadsheet, the key, the worker id, the state directory).
#[test]
fn the_example_states_the_real_defaults() {
    let c = example();
    let d = Config::parse("spreadsheet_id = \"x\"", "defaults", &BTreeMap::new())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.api_base_url, d.api_base_url);
    assert_eq!(c.slots, d.slots);
    assert_eq!(c.poll_interval, d.poll_interval);
    assert_eq!(c.idle_poll_interval, d.idle_poll_interval);
    assert_eq!(c.stale_after, d.stale_after);
    assert_eq!(c.dead_after, d.dead_after);
    assert_eq!(c.heartbeat_interval, d.heartbeat_interval);
    assert_eq!(c.lease_ttl, d.lease_ttl);
    assert_eq!(c.shutdown_grace, d.shutdown_grace);
    assert_eq!(c.intake, d.intake);
    assert_eq!(c.requests_per_minute, d.requests_per_minute);
    assert_eq!(c.call_timeout, d.call_timeout);
    assert_eq!(c.max_retries, d.max_retries);
    assert_eq!(c.sweep_rows, d.sweep_rows);
    assert_eq!(c.retention, d.retention);
    assert_eq!(c.protect, d.protect);
    assert_eq!(c.protect_editors, d.protect_editors);
    assert_eq!(c.headers, d.headers);
    assert_eq!(c.states, d.states);
}

/// The config the Kubernetes manifests ship must load too, and leave the replicas inside the
/// shared per-user quota of one service account.
#[test]
fn the_kubernetes_config_map_holds_a_valid_config() {
    let text = include_str!("../deploy/k8s/sheetq.toml");
    let c = Config::parse(text, "deploy/k8s/sheetq.toml", &BTreeMap::new())
        .unwrap_or_else(|e| panic!("{e}"));
    let kustomization = include_str!("../deploy/k8s/kustomization.yaml");
    assert!(
        kustomization.contains("configMapGenerator:") && kustomization.contains("- sheetq.toml"),
        "the ConfigMap is generated from sheetq.toml, so a config change rolls the pods"
    );
    let deployment = include_str!("../deploy/k8s/deployment.yaml");
    let replicas: u32 = deployment
        .lines()
        .find_map(|l| l.trim().strip_prefix("replicas: "))
        .and_then(|n| n.trim().parse().ok())
        .expect("deployment.yaml sets replicas");
    // The replicas split the account's budget among themselves; the budget itself must fit
    // Google's 60 a minute per user, whatever the number of replicas.
    // sheetq splits the account's budget between live daemons itself, so the manifests keep
    // the default the README recommends: dividing it by hand as well would give each
    // replica a share of a share.
    assert!(replicas >= 1);
    let defaults = Config::parse("spreadsheet_id = \"x\"\n", "defaults", &BTreeMap::new())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        c.requests_per_minute, defaults.requests_per_minute,
        "deploy/k8s/sheetq.toml must keep the default requests_per_minute (the account's budget, split by sheetq between replicas)"
    );
    let grace: u64 = deployment
        .lines()
        .find_map(|l| l.trim().strip_prefix("terminationGracePeriodSeconds: "))
        .and_then(|n| n.trim().parse().ok())
        .expect("deployment.yaml sets terminationGracePeriodSeconds");
    assert!(
        grace > c.shutdown_grace.as_secs() * 2,
        "terminationGracePeriodSeconds {grace} must leave room above shutdown_grace"
    );
}

/// systemd's stop timeout must exceed the default shutdown grace by a margin, or running
/// jobs are SIGKILLed before sheetq has written their results.
#[test]
fn the_systemd_stop_timeout_is_above_the_shutdown_grace() {
    let unit = include_str!("../deploy/sheetq.service");
    let stop = unit
        .lines()
        .find_map(|l| l.strip_prefix("TimeoutStopSec="))
        .expect("the unit sets TimeoutStopSec");
    let stop = humantime::parse_duration(stop.trim()).expect("TimeoutStopSec is a duration");
    let grace = example().shutdown_grace;
    assert!(
        stop > grace * 2,
        "TimeoutStopSec {stop:?} vs shutdown_grace {grace:?}"
    );
}

/// `make image` tags the image with the crate's version, and the Kubernetes manifests run
/// that tag.
#[test]
fn the_image_tag_of_make_image_is_the_one_kubernetes_runs() {
    let makefile = include_str!("../Makefile");
    assert!(
        makefile.contains("IMAGE ?= sheetq:$(VERSION)") && makefile.contains("Cargo.toml"),
        "make image tags sheetq:<crate version>"
    );
    let kustomization = include_str!("../deploy/k8s/kustomization.yaml");
    let tag = kustomization
        .lines()
        .find_map(|l| l.trim().strip_prefix("newTag: "))
        .expect("kustomization.yaml sets the image tag");
    assert_eq!(
        tag.trim(),
        env!("CARGO_PKG_VERSION"),
        "deploy/k8s/kustomization.yaml's newTag must be the crate's version, which make image builds"
    );
    let deployment = include_str!("../deploy/k8s/deployment.yaml");
    assert!(
        deployment.contains("image: sheetq\n"),
        "the tag comes from kustomization.yaml"
    );
}

/// The Workload Identity overlay takes out exactly what the base puts in for a key (the
/// Secret's volume and mount, by name), leaves SHEETQ_CREDENTIALS empty (unset: application
/// default credentials) and runs the pods as the annotated ServiceAccount; the PodMonitoring
/// selects the Deployment's pods on its metrics port.
#[test]
fn the_workload_identity_overlay_and_the_pod_monitoring_fit_the_base_deployment() {
    let deployment = include_str!("../deploy/k8s/deployment.yaml");
    let overlay = include_str!("../deploy/k8s/workload-identity/kustomization.yaml");
    let patch = include_str!("../deploy/k8s/workload-identity/no-key.yaml");
    let account = include_str!("../deploy/k8s/workload-identity/serviceaccount.yaml");
    assert!(overlay.contains("- ..") && overlay.contains("- path: no-key.yaml"));
    assert!(
        deployment.contains("- name: key\n          secret:")
            && deployment.contains(
                "            - name: key\n              mountPath: /var/run/secrets/sheetq"
            ),
        "the base mounts the key as volume `key`, which the overlay deletes by name"
    );
    assert_eq!(
        patch.matches("- name: key\n").count(),
        2,
        "the overlay deletes the key's volume and its mount:\n{patch}"
    );
    assert_eq!(patch.matches("$patch: delete").count(), 2);
    assert!(patch.contains("- name: SHEETQ_CREDENTIALS\n              value: \"\""));
    assert!(patch.contains("serviceAccountName: sheetq"));
    assert!(
        account.contains("name: sheetq") && account.contains("iam.gke.io/gcp-service-account:")
    );
    let monitoring = include_str!("../deploy/k8s/podmonitoring.yaml");
    assert!(deployment.contains("- name: metrics\n              containerPort: 9184"));
    for label in [
        "app.kubernetes.io/name: sheetq",
        "app.kubernetes.io/component: daemon",
    ] {
        assert!(
            deployment.contains(label) && monitoring.contains(label),
            "the PodMonitoring selects the pods by {label}"
        );
    }
    assert!(monitoring.contains("- port: metrics") && monitoring.contains("path: /metrics"));
}

#[test]
fn the_examples_spreadsheet_list_loads_once_uncommented() {
    let mut text = String::new();
    let mut in_list = false;
    for line in EXAMPLE.lines() {
        if line.starts_with("spreadsheet_id =") {
            continue;
        }
        if line.starts_with("# [[spreadsheets]]") {
            in_list = true;
        }
        if in_list && !line.starts_with('#') {
            in_list = false;
        }
        match line.strip_prefix("# ").filter(|_| in_list) {
            Some(uncommented) => text.push_str(uncommented),
            None => text.push_str(line),
        }
        text.push('\n');
    }
    let c = Config::parse(
        &text,
        "sheetq.example.toml, list uncommented",
        &BTreeMap::new(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let each = c.each_spreadsheet();
    assert_eq!(each.len(), 2, "{text}");
    assert_eq!(each[1].label, "承認ボタン");
    assert_eq!(each[1].intake, sheetq::config::Intake::Poll);
    // The example sets idle_poll_interval as one spreadsheet's default; a list spaces out.
    let listed = Config::parse(
        &text.replace("idle_poll_interval = \"2s\"\n", ""),
        "the list without idle_poll_interval",
        &BTreeMap::new(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        listed.idle_poll_interval,
        std::time::Duration::from_secs(30)
    );
}

#[test]
fn the_unit_spaces_its_restarts_out() {
    let unit = include_str!("../deploy/sheetq.service");
    for key in [
        "RestartSteps=",
        "RestartMaxDelaySec=",
        "RestartPreventExitStatus=2",
    ] {
        assert!(
            unit.lines().any(|l| l.starts_with(key)),
            "deploy/sheetq.service sets {key}: a start that keeps failing must not hammer the API"
        );
    }
}
