//! The CSI Identity and Node services: each gRPC call checked, then handed to the
//! [`Publisher`](super::publisher::Publisher) (blocking work, on tokio's blocking threads), and its
//! outcome mapped to a gRPC status.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use tonic::{Code, Request, Response, Status};

use super::attributes;
use super::plugin_metrics::PluginMetrics;
use super::proto::{self, identity_server::Identity, node_server::Node};
use super::publisher::{PublishRequest, Publisher, Refusal};
use super::DRIVER_NAME;

/// What both services share.
pub struct Plugin {
    pub node_id: String,
    pub publisher: Arc<Publisher>,
    pub metrics: Arc<PluginMetrics>,
}

fn status_of(r: Refusal) -> Status {
    match r {
        Refusal::InvalidArgument(m) => Status::invalid_argument(m),
        Refusal::NotFound(m) => Status::not_found(m),
        Refusal::AlreadyExists(m) => Status::already_exists(m),
        Refusal::FailedPrecondition(m) => Status::failed_precondition(m),
        Refusal::Internal(m) => Status::internal(m),
    }
}

fn outcome(code: Code) -> &'static str {
    match code {
        Code::Ok => "ok",
        Code::InvalidArgument => "invalid_argument",
        Code::NotFound => "not_found",
        Code::AlreadyExists => "already_exists",
        Code::FailedPrecondition => "failed_precondition",
        Code::Unimplemented => "unimplemented",
        _ => "internal",
    }
}

impl Plugin {
    /// Run `work` on a blocking thread and count the call.
    async fn blocking<T: Send + 'static>(
        &self,
        op: &'static str,
        work: impl FnOnce(&Publisher) -> Result<T, Status> + Send + 'static,
    ) -> Result<T, Status> {
        let started = Instant::now();
        let publisher = self.publisher.clone();
        let result = tokio::task::spawn_blocking(move || work(&publisher))
            .await
            .unwrap_or_else(|e| Err(Status::internal(format!("{op}: {e}"))));
        let code = result.as_ref().map_or_else(Status::code, |_| Code::Ok);
        self.metrics
            .call(op, outcome(code), Some(started.elapsed().as_secs_f64()));
        if let Err(s) = &result {
            log::warn!("{op}: {}", s.message());
        }
        result
    }

    /// Count a call answered at once, from what the plugin holds (not timed: nothing to wait
    /// for).
    fn count(&self, op: &'static str) {
        self.metrics.call(op, "ok", None);
    }
}

#[tonic::async_trait]
impl Identity for Arc<Plugin> {
    async fn get_plugin_info(
        &self,
        _: Request<proto::GetPluginInfoRequest>,
    ) -> Result<Response<proto::GetPluginInfoResponse>, Status> {
        self.count("GetPluginInfo");
        Ok(Response::new(proto::GetPluginInfoResponse {
            name: DRIVER_NAME.into(),
            vendor_version: crate::VERSION.into(),
            manifest: Default::default(),
        }))
    }

    async fn get_plugin_capabilities(
        &self,
        _: Request<proto::GetPluginCapabilitiesRequest>,
    ) -> Result<Response<proto::GetPluginCapabilitiesResponse>, Status> {
        self.count("GetPluginCapabilities");
        // A node plugin only: no controller service, no topology.
        Ok(Response::new(proto::GetPluginCapabilitiesResponse {
            capabilities: Vec::new(),
        }))
    }

    async fn probe(
        &self,
        _: Request<proto::ProbeRequest>,
    ) -> Result<Response<proto::ProbeResponse>, Status> {
        self.blocking("Probe", |p| {
            p.ready().map_err(Status::failed_precondition)?;
            Ok(Response::new(proto::ProbeResponse { ready: Some(true) }))
        })
        .await
    }
}

fn required<'a>(value: &'a str, what: &str) -> Result<&'a str, Status> {
    if value.is_empty() {
        Err(Status::invalid_argument(format!("{what} is required")))
    } else {
        Ok(value)
    }
}

#[tonic::async_trait]
impl Node for Arc<Plugin> {
    async fn node_stage_volume(
        &self,
        _: Request<proto::NodeStageVolumeRequest>,
    ) -> Result<Response<proto::NodeStageVolumeResponse>, Status> {
        Err(Status::unimplemented(
            "hudifs shares daemons itself: it has no STAGE_UNSTAGE_VOLUME capability",
        ))
    }

    async fn node_unstage_volume(
        &self,
        _: Request<proto::NodeUnstageVolumeRequest>,
    ) -> Result<Response<proto::NodeUnstageVolumeResponse>, Status> {
        Err(Status::unimplemented(
            "hudifs shares daemons itself: it has no STAGE_UNSTAGE_VOLUME capability",
        ))
    }

    async fn node_publish_volume(
        &self,
        request: Request<proto::NodePublishVolumeRequest>,
    ) -> Result<Response<proto::NodePublishVolumeResponse>, Status> {
        let r = request.into_inner();
        self.blocking("NodePublishVolume", move |publisher| {
            let volume_id = required(&r.volume_id, "volume_id")?;
            let target = PathBuf::from(required(&r.target_path, "target_path")?);
            if !target.is_absolute() {
                return Err(Status::invalid_argument(format!(
                    "target_path {} is not absolute",
                    target.display()
                )));
            }
            let capability = r
                .volume_capability
                .as_ref()
                .ok_or_else(|| Status::invalid_argument("volume_capability is required"))?;
            let flags = match &capability.access_type {
                Some(proto::volume_capability::AccessType::Mount(m)) => m.mount_flags.clone(),
                Some(proto::volume_capability::AccessType::Block(_)) => {
                    return Err(Status::invalid_argument(
                        "hudifs volumes are file systems: block access is not supported",
                    ))
                }
                None => Vec::new(),
            };
            let spec = attributes::parse(&r.volume_context, &flags)
                .map_err(|m| Status::invalid_argument(format!("volume {volume_id}: {m}")))?;
            let secrets = attributes::Secrets::from_request(&r.secrets)
                .map_err(|m| Status::invalid_argument(format!("volume {volume_id}: {m}")))?;
            publisher
                .publish(&PublishRequest {
                    volume_id,
                    target: &target,
                    spec: &spec,
                    secrets: &secrets,
                })
                .map_err(status_of)?;
            Ok(Response::new(proto::NodePublishVolumeResponse {}))
        })
        .await
    }

    async fn node_unpublish_volume(
        &self,
        request: Request<proto::NodeUnpublishVolumeRequest>,
    ) -> Result<Response<proto::NodeUnpublishVolumeResponse>, Status> {
        let r = request.into_inner();
        self.blocking("NodeUnpublishVolume", move |publisher| {
            let volume_id = required(&r.volume_id, "volume_id")?;
            let target = PathBuf::from(required(&r.target_path, "target_path")?);
            publisher.unpublish(volume_id, &target).map_err(status_of)?;
            Ok(Response::new(proto::NodeUnpublishVolumeResponse {}))
        })
        .await
    }

    async fn node_get_volume_stats(
        &self,
        _: Request<proto::NodeGetVolumeStatsRequest>,
    ) -> Result<Response<proto::NodeGetVolumeStatsResponse>, Status> {
        Err(Status::unimplemented(
            "no GET_VOLUME_STATS capability: a read-only table has no capacity to report",
        ))
    }

    async fn node_expand_volume(
        &self,
        _: Request<proto::NodeExpandVolumeRequest>,
    ) -> Result<Response<proto::NodeExpandVolumeResponse>, Status> {
        Err(Status::unimplemented("hudifs volumes are read-only"))
    }

    async fn node_get_capabilities(
        &self,
        _: Request<proto::NodeGetCapabilitiesRequest>,
    ) -> Result<Response<proto::NodeGetCapabilitiesResponse>, Status> {
        self.count("NodeGetCapabilities");
        Ok(Response::new(proto::NodeGetCapabilitiesResponse {
            capabilities: Vec::new(),
        }))
    }

    async fn node_get_info(
        &self,
        _: Request<proto::NodeGetInfoRequest>,
    ) -> Result<Response<proto::NodeGetInfoResponse>, Status> {
        self.count("NodeGetInfo");
        Ok(Response::new(proto::NodeGetInfoResponse {
            node_id: self.node_id.clone(),
            max_volumes_per_node: 0,
            accessible_topology: None,
        }))
    }
}
