//! The packaged settings file lists every setting of `tickscope-server serve`: an admin reads
//! what can be set in /etc/tickscope/server.env, so a flag added without its line there would be
//! a setting nobody finds.

use std::process::Command;

use crate::common::processes::repo_root;

#[test]
fn every_setting_of_serve_is_in_the_packaged_settings_file() {
    let help = Command::new(env!("CARGO_BIN_EXE_tickscope-server"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    assert!(help.status.success());
    let help = String::from_utf8(help.stdout).unwrap();
    let settings: Vec<&str> = help
        .split("[env: ")
        .skip(1)
        .filter_map(|rest| rest.split(['=', ']']).next())
        .collect();
    assert!(settings.len() > 30, "{settings:?}");
    let file = std::fs::read_to_string(repo_root().join("packaging/deb/server.env")).unwrap();
    let missing: Vec<&&str> = settings
        .iter()
        .filter(|name| !file.contains(&format!("#{name}=")))
        .collect();
    assert!(
        missing.is_empty(),
        "settings of serve missing from packaging/deb/server.env: {missing:?}"
    );
}
