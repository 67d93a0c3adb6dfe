#![doc = include_str!("../../supervision.md")]

mod app;
mod behaviour;
pub mod cluster;
mod config;
mod control;
pub mod frontier;
mod master;
mod pool;
pub mod scheduler;
mod slave;
mod sup;
pub mod traps;
mod types;

pub use app::{App, AppError, AppHandle};
/// Implementers of the behaviours use the same `async_trait` as the traits.
pub use async_trait::async_trait;
pub use behaviour::*;
pub use config::{Behaviours, CrawlConfig, RestartIntensity};
pub use control::{Control, ControlMsg, ControlRequest};
pub use master::{IdleReason, Master, MasterMsg, NodeInfo, SlaveReport, Status};
pub use pool::{Pool, PoolMsg};
pub use slave::{Slave, SlaveTask};
pub use sup::{ChildInfo, ChildRole, Sup, SupMsg};
pub use types::*;
