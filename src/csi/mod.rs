//! `hudifs csi`: a Kubernetes CSI node plugin (CSI v1, gRPC on a Unix socket), so that a pod
//! can ask for a table, or one instant of it, as a volume (docs/kubernetes.md).
//!
//! - [`attributes`]: a volume's attributes checked into one [`attributes::VolumeSpec`];
//! - [`publisher`]: one shared daemon per (table, options) on the node, a read-only bind mount
//!   per pod, and their records under the state directory;
//! - [`bind`]: the bind mounts;
//! - `server`: the Identity and Node services, mapping gRPC calls to the publisher;
//! - `plugin_metrics`: the plugin's own metric families (`--metrics`);
//! - [`proto`]: the CSI messages and services, generated from `proto/csi.proto`.

pub mod attributes;
pub mod bind;
mod plugin_metrics;
pub mod proto;
pub mod publisher;
mod server;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::cli::CsiArgs;
use crate::error::{Error, Result};

/// The driver's name, as GetPluginInfo gives it and a `CSIDriver` object names it.
pub const DRIVER_NAME: &str = "csi.hudifs.dev";

/// The socket path of a CSI endpoint.
pub fn socket_path(endpoint: &str) -> Result<PathBuf> {
    let path = if let Some(rest) = endpoint.strip_prefix("unix://") {
        rest
    } else if let Some(rest) = endpoint.strip_prefix("unix:") {
        rest
    } else if endpoint.contains("://") {
        return Err(Error::Usage(format!(
            "--endpoint {endpoint}: only unix:// endpoints are served (kubelet calls plugins on \
             a Unix socket)"
        )));
    } else {
        endpoint
    };
    if !path.starts_with('/') {
        return Err(Error::Usage(format!(
            "--endpoint {endpoint}: the socket path must be absolute"
        )));
    }
    Ok(PathBuf::from(path))
}

/// Bind the socket at `path`, replacing a socket a previous plugin left there.
fn bind_socket(path: &Path) -> Result<tokio::net::UnixListener> {
    use std::os::unix::fs::FileTypeExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir.display().to_string(), e))?;
    }
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if !m.file_type().is_socket() {
            return Err(Error::Usage(format!(
                "{} exists and is not a socket",
                path.display()
            )));
        }
        std::fs::remove_file(path).map_err(|e| Error::io(path.display().to_string(), e))?;
    }
    tokio::net::UnixListener::bind(path).map_err(|e| Error::io(path.display().to_string(), e))
}

/// Serve the CSI plugin until SIGTERM or SIGINT. Published volumes and their daemons stay up
/// when it stops: a restarted plugin takes them over from its state directory.
pub fn run(args: &CsiArgs) -> Result<()> {
    if args.node_id.trim().is_empty() {
        return Err(Error::Usage("--node-id (or NODE_NAME) is empty".into()));
    }
    let socket = socket_path(&args.endpoint)?;
    let exe = std::env::current_exe().map_err(|e| Error::io("the hudifs program", e))?;
    let publisher = Arc::new(
        publisher::Publisher::open(&args.state_dir, &exe, &args.cache_root)
            .map_err(|e| Error::io(args.state_dir.display().to_string(), e))?,
    );
    let metrics = Arc::new(plugin_metrics::PluginMetrics::new());
    if let Some(addr) = &args.metrics {
        let listener = crate::metrics::bind(addr).map_err(|e| Error::io("--metrics", e))?;
        let (p, m) = (publisher.clone(), metrics.clone());
        crate::metrics::serve_text(listener, move || {
            let uses = p.daemon_use();
            let own = m.text(uses.values().sum(), uses.len());
            let daemons: Vec<(String, String)> = p
                .daemon_metrics()
                .into_iter()
                .filter_map(|(key, addr)| Some((key, plugin_metrics::scrape(&addr)?)))
                .collect();
            plugin_metrics::with_daemons(&own, &daemons)
        })
        .map_err(|e| Error::io("metrics thread", e))?;
    }
    let plugin = Arc::new(server::Plugin {
        node_id: args.node_id.clone(),
        publisher,
        metrics,
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(8)
        .build()
        .map_err(|e| Error::io("tokio runtime", e))?;
    runtime.block_on(async move {
        let listener = bind_socket(&socket)?;
        log::info!(
            "CSI plugin {DRIVER_NAME} {} on {} (node {}, state {})",
            crate::VERSION,
            socket.display(),
            args.node_id,
            args.state_dir.display()
        );
        let stop = async {
            use tokio::signal::unix::{signal, SignalKind};
            match (
                signal(SignalKind::terminate()),
                signal(SignalKind::interrupt()),
            ) {
                (Ok(mut term), Ok(mut int)) => {
                    tokio::select! {
                        _ = term.recv() => {}
                        _ = int.recv() => {}
                    }
                }
                _ => std::future::pending::<()>().await,
            }
            log::info!("CSI plugin stopping; published volumes stay mounted");
        };
        let serve = tonic::transport::Server::builder()
            .add_service(proto::identity_server::IdentityServer::new(plugin.clone()))
            .add_service(proto::node_server::NodeServer::new(plugin))
            .serve_with_incoming(tokio_stream::wrappers::UnixListenerStream::new(listener));
        // Not a graceful shutdown: kubelet keeps its connection open for good, so waiting for
        // connections to drain would wait for the kill that follows SIGTERM. A call in flight
        // is cut; kubelet retries it, and publish and unpublish are idempotent.
        tokio::select! {
            served = serve => served.map_err(|e| Error::Mount(format!("CSI server: {e}")))?,
            _ = stop => {}
        }
        let _ = std::fs::remove_file(&socket);
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_unix_sockets() {
        assert_eq!(
            socket_path("unix:///csi/csi.sock").unwrap(),
            Path::new("/csi/csi.sock")
        );
        assert_eq!(
            socket_path("unix:/csi/csi.sock").unwrap(),
            Path::new("/csi/csi.sock")
        );
        assert_eq!(socket_path("/x.sock").unwrap(), Path::new("/x.sock"));
        assert!(socket_path("tcp://0.0.0.0:10000").is_err());
        assert!(socket_path("unix://relative.sock").is_err());
    }
}
