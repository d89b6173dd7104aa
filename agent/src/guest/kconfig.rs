//! The kernel build configuration's timer options (`/proc/config.gz`, `/boot/config-<release>`).

use crate::wire::KernelConfig;

/// Reads the timer options from a kernel `.config`. An option the file does not mention stays
/// `None`: older kernels predate some of them, and that is for the reader to interpret.
pub fn parse(text: &str, source: &str) -> KernelConfig {
    let mut config = KernelConfig {
        source: source.to_string(),
        ..KernelConfig::default()
    };
    for line in text.lines() {
        let line = line.trim();
        let (name, value) = if let Some(name) = line
            .strip_prefix("# ")
            .and_then(|l| l.strip_suffix(" is not set"))
        {
            (name, "n")
        } else if let Some((name, value)) = line.split_once('=') {
            (name, value)
        } else {
            continue;
        };
        let flag = match value {
            "y" | "m" => Some(true),
            "n" => Some(false),
            _ => None,
        };
        match name {
            "CONFIG_HZ" => config.hz = value.parse().ok(),
            "CONFIG_HZ_PERIODIC" => config.hz_periodic = flag,
            "CONFIG_NO_HZ_IDLE" => config.no_hz_idle = flag,
            "CONFIG_NO_HZ_FULL" => config.no_hz_full = flag,
            "CONFIG_NO_HZ" => config.no_hz_legacy = flag,
            _ => {}
        }
    }
    config
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timer_options_of_kernels_old_and_new() {
        // (config lines, HZ, HZ_PERIODIC, NO_HZ_IDLE, NO_HZ_FULL, legacy NO_HZ)
        type Row = (
            &'static str,
            Option<u32>,
            Option<bool>,
            Option<bool>,
            Option<bool>,
            Option<bool>,
        );
        let cases: [Row; 4] = [
            // Debian 12, 6.1 cloud kernel (lines as in its /boot/config).
            (
                "CONFIG_NO_HZ_COMMON=y\n# CONFIG_HZ_PERIODIC is not set\n# CONFIG_NO_HZ_IDLE is not set\nCONFIG_NO_HZ_FULL=y\n# CONFIG_NO_HZ is not set\nCONFIG_HZ_250=y\nCONFIG_HZ=250\n",
                Some(250),
                Some(false),
                Some(false),
                Some(true),
                Some(false),
            ),
            // RHEL 5 / 2.6.18: periodic at 1000 Hz, no NO_HZ option at all.
            (
                "CONFIG_HZ_1000=y\nCONFIG_HZ=1000\n",
                Some(1000),
                None,
                None,
                None,
                None,
            ),
            // 2.6.32-3.9 era: the legacy switch.
            (
                "CONFIG_NO_HZ=y\nCONFIG_HZ_1000=y\nCONFIG_HZ=1000\n",
                Some(1000),
                None,
                None,
                None,
                Some(true),
            ),
            // 3.10+ built periodic on purpose.
            (
                "CONFIG_HZ_PERIODIC=y\n# CONFIG_NO_HZ_IDLE is not set\n# CONFIG_NO_HZ_FULL is not set\nCONFIG_HZ=100\n",
                Some(100),
                Some(true),
                Some(false),
                Some(false),
                None,
            ),
        ];
        for (text, hz, periodic, idle, full, legacy) in cases {
            let c = parse(text, "boot_config");
            assert_eq!(
                (
                    c.hz,
                    c.hz_periodic,
                    c.no_hz_idle,
                    c.no_hz_full,
                    c.no_hz_legacy
                ),
                (hz, periodic, idle, full, legacy),
                "{text}"
            );
        }
    }

    #[test]
    fn garbage_gives_unknowns_not_guesses() {
        let c = parse("CONFIG_HZ=fast\nrandom text\n=\n", "boot_config");
        assert_eq!(c.hz, None);
        assert_eq!(c.no_hz_full, None);
    }
}
