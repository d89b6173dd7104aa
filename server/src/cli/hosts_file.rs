//! `token add NAME --role agent --hosts-file hosts.txt --output tokens.yml`: one agent token per
//! host of a file, each bound to its host, written as the Ansible variables the agent rollout
//! role reads (`contrib/ansible`, docs/ansible.md).
//!
//! The file is checked whole before anything is made: a line that is not a host name, or a name
//! given twice, refuses the file with every such line named. The output must not exist (a
//! second run would otherwise overwrite the tokens the hosts already use), and is created
//! readable by its owner alone before any token is stored; the tokens are stored in one
//! transaction, and the file is removed again if that fails, so either every host has a token
//! in the file or none was made.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use tickscope_wire::MAX_NAME_CHARS;

use super::args::DbArg;
use crate::auth;
use crate::clock;

/// The host names of a hosts file, in its order, or every line it refuses (1-based, and why).
pub fn parse(text: &str) -> Result<Vec<String>, Vec<(usize, String)>> {
    let mut hosts = Vec::new();
    let mut first_line: HashMap<String, usize> = HashMap::new();
    let mut refused = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let name = line.split('#').next().unwrap_or("").trim();
        if name.is_empty() {
            continue;
        }
        if let Err(why) = host_name(name) {
            refused.push((n, format!("{name:?} {why}")));
            continue;
        }
        if let Some(first) = first_line.get(name) {
            refused.push((n, format!("{name:?} is named already on line {first}")));
            continue;
        }
        first_line.insert(name.to_string(), n);
        hosts.push(name.to_string());
    }
    if hosts.is_empty() && refused.is_empty() {
        refused.push((0, "names no host".into()));
    }
    if refused.is_empty() {
        Ok(hosts)
    } else {
        Err(refused)
    }
}

/// A name an agent reports its host as (`--host-name`, by default its hostname) and Ansible
/// names it by: letters, digits, `-`, `_` and `.`, starting with a letter or digit.
fn host_name(name: &str) -> Result<(), &'static str> {
    if name.chars().count() > MAX_NAME_CHARS {
        return Err("is longer than a host name may be");
    }
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return Err("does not start with a letter or digit");
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err("is not a host name (letters, digits, '-', '_' and '.' only, one per line)");
    }
    Ok(())
}

/// The output: Ansible variables in YAML, every string double-quoted (host names are plain, but
/// a YAML reader would take `yes` or `010` for something else).
fn tokens_yaml(made_at: &str, tokens: &[(String, String)]) -> String {
    let mut out = format!(
        "# tickscope agent tokens, one per host, made {made_at} by `tickscope-server token add \
         --hosts-file`.\n# Secret: encrypt this file (ansible-vault encrypt) and keep it out of \
         version control\n# unencrypted. The agent rollout role reads tickscope_agent_tokens.\n\
         tickscope_agent_tokens:\n"
    );
    for (host, token) in tokens {
        out.push_str(&format!("  \"{host}\": \"{token}\"\n"));
    }
    out
}

pub async fn enrol(name: &str, hosts_file: &Path, output: &Path, db: &DbArg) -> Result<()> {
    let text = std::fs::read_to_string(hosts_file)
        .with_context(|| format!("cannot read the hosts file {}", hosts_file.display()))?;
    let hosts = parse(&text).map_err(|refused| {
        let lines: Vec<String> = refused
            .iter()
            .map(|(n, why)| format!("  line {n}: {why}"))
            .collect();
        anyhow::anyhow!(
            "{} refused, no token made:\n{}",
            hosts_file.display(),
            lines.join("\n")
        )
    })?;
    // Made first, and only if it is new: the tokens exist nowhere else.
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode_0600()
        .open(output)
        .with_context(|| {
            format!(
                "cannot create {} (an existing tokens file is never overwritten: its tokens are in use; give another --output)",
                output.display()
            )
        })?;
    let made = async {
        let db = db.open(false).await?;
        let tokens: Vec<(String, String)> = hosts
            .iter()
            .map(|h| Ok((h.clone(), auth::new_token()?)))
            .collect::<Result<_>>()?;
        let rows: Vec<(String, String, String)> = tokens
            .iter()
            .map(|(host, token)| {
                (
                    format!("{name} {host}"),
                    auth::token_hash(token),
                    host.clone(),
                )
            })
            .collect();
        let now = clock::now_ms();
        file.write_all(tokens_yaml(&crate::export::rfc3339(now), &tokens).as_bytes())?;
        file.sync_all()?;
        db.insert_agent_tokens(&rows, now).await?;
        db.close().await;
        anyhow::Ok(())
    }
    .await;
    if let Err(e) = made {
        let _ = std::fs::remove_file(output);
        return Err(e.context(format!("no token made; {} removed", output.display())));
    }
    eprintln!(
        "Made {} agent tokens, each bound to its host, in {} (mode 0600). Encrypt it: ansible-vault encrypt {}",
        hosts.len(),
        output.display(),
        output.display()
    );
    Ok(())
}

/// `OpenOptions::mode(0o600)` where the platform has modes.
trait Private {
    fn mode_0600(&mut self) -> &mut Self;
}

impl Private for std::fs::OpenOptions {
    fn mode_0600(&mut self) -> &mut Self {
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(self, 0o600);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hosts_file_is_taken_whole_or_refused_with_every_bad_line() {
        // (file, the hosts taken or the lines refused)
        type Case<'a> = (&'a str, Result<Vec<&'a str>, Vec<usize>>);
        let cases: [Case; 6] = [
            (
                "hv-01\n# a comment\n\nhv-02.example  # rack 4\n",
                Ok(vec!["hv-01", "hv-02.example"]),
            ),
            // Names differ in case as the server's host names do: HV-01 is another host.
            ("hv-01\nhv 02\n-hv\nhv-01\nHV-01\n", Err(vec![2, 3, 4])),
            ("hv-01\nhv;rm -rf /\n", Err(vec![2])),
            ("\n# nothing\n", Err(vec![0])),
            ("h\u{202e}x\n", Err(vec![1])),
            (&"x".repeat(MAX_NAME_CHARS + 1), Err(vec![1])),
        ];
        for (text, expected) in cases {
            let got = parse(text).map_err(|e| e.iter().map(|(n, _)| *n).collect::<Vec<_>>());
            let expected = expected.map(|v| v.into_iter().map(String::from).collect::<Vec<_>>());
            assert_eq!(got, expected, "{text:?}");
        }
        let refused = parse("a\na\n").unwrap_err();
        assert!(refused[0].1.contains("line 1"), "{refused:?}");
    }

    #[test]
    fn the_tokens_file_is_quoted_yaml() {
        let yaml = tokens_yaml("2026-12-06T00:00:00Z", &[("yes".into(), "tks_a".into())]);
        assert!(
            yaml.contains("tickscope_agent_tokens:\n  \"yes\": \"tks_a\"\n"),
            "{yaml}"
        );
    }
}
