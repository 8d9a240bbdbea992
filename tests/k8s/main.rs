//! Kubernetes: `hudifs csi` played by a gRPC client as kubelet plays it, and the deployment
//! files of `deploy/` rendered and validated.
//!
//! One test binary; each file is a module, its tests named `file::test`. What each proves:
//! tests/k8s/README.md.

mod csi_client;

mod csi;
mod deploy_manifests;
