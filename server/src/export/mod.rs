//! Exports for spreadsheets and scripts: the ranked guests (`guests.csv`), the upgrade plan by
//! group (`plan.csv`) and by guest (`plan-guests.csv`), and the plan as an Ansible inventory
//! (`plan-inventory.yml`). CSV columns are stable: new ones are only ever added at the end.
//!
//! VM names and kernel strings come from machines we do not control: a cell that a spreadsheet
//! would read as a formula (starting with `=`, `+`, `-`, `@`, a tab or a carriage return) is
//! prefixed with `'`, which spreadsheets show as text; bidi controls, zero-width and control
//! characters are written as escapes (`\u{202e}`), so that a cell shows what was stored.

mod cells;
mod guests;
mod inventory;
mod plan;

#[cfg(test)]
mod golden;

pub use cells::{Context, file_name, rfc3339, text_cell};
pub use guests::{GUEST_COLUMNS, guests_csv, guests_csv_rows};
pub use inventory::{ansible_group, plain_host_name, plan_inventory};
pub use plan::{PLAN_COLUMNS, PLAN_GUEST_COLUMNS, plan_csv, plan_guests_csv};
