//! The drive list the page shows: the engine's (`kopiru::flash::drives`:
//! the system's disk left out, each drive's partitions and labels, and
//! why one may not be written), looked at again every second, so a card
//! plugged in or out shows up without a reload.

use super::Shared;
use kopiru::{DeviceRefusal, Refusal};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// How often sysfs and the mount table are read again while a page is
/// open (cheap: a few small files).
const EVERY: Duration = Duration::from_secs(1);

/// Why a drive may not be written, in the page's words (the command's
/// mention `--force`, which the page does not offer).
fn why(r: &Refusal) -> String {
    match r {
        Refusal::Device(DeviceRefusal::Mounted { at }) => {
            format!("mounted at {at}: unmount it first")
        }
        Refusal::Device(DeviceRefusal::InUse { chain }) => format!("in use: {chain}"),
        Refusal::Device(DeviceRefusal::HoldsRootFs) => "holds the system".into(),
        Refusal::Device(DeviceRefusal::Partition) => "a partition, not a whole drive".into(),
        other => other.to_string(),
    }
}

/// The drives now, as JSON for the page.
pub fn list() -> Value {
    let drives: Vec<Value> = kopiru::flash::drives()
        .iter()
        .map(|d| {
            json!({
                "path": d.path.to_string_lossy(),
                "size": d.size,
                "model": d.model,
                "removable": d.removable,
                "bus": d.bus,
                "partitions": d.partitions.iter().map(|p| json!({
                    "path": p.path.to_string_lossy(),
                    "size": p.size,
                    "label": p.label,
                    "mounted_at": p.mounted_at,
                })).collect::<Vec<_>>(),
                "unavailable": d.unavailable.as_ref().map(why),
            })
        })
        .collect();
    Value::Array(drives)
}

/// Keeps `shared`'s drive list current while a page is open (and once at
/// the start): a change is sent to every page.
pub fn watch(shared: Arc<Shared>) {
    std::thread::spawn(move || loop {
        let watched = shared.lock().pages > 0;
        let now = list();
        let changed = {
            let mut st = shared.lock();
            let changed = st.drives != now;
            if changed {
                st.drives = now;
            }
            changed
        };
        if changed {
            shared.changed();
        }
        // Slower while no page looks.
        std::thread::sleep(if watched { EVERY } else { EVERY * 3 });
    });
}
