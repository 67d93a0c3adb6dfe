//! Whether fetching keeps this machine's CPU busy, so that the indexer
//! waits for it (`CrawlConfig::index_yields_to_fetching`). A thread at nice
//! 10 still takes about a sixth of a core from a fetching thread beside it
//! (the scheduler's weights), and on a machine whose cores are hyperthreads
//! of one another it slows the fetching thread beside it whatever its
//! priority. So while fetching wants the machine, the index waits, and its
//! pages wait in the node's queue on disk; once fetching leaves CPU (a
//! polite crawl, a crawl done) it catches up.
//!
//! Fetching's CPU is that of the process's threads at normal priority: the
//! index's threads are the ones at nice 10 (`IndexThread`, and the threads
//! it starts, which inherit it).

use crate::types::Millis;

/// Fetching is busy when its threads use more than this share of the
/// machine's cores.
const BUSY_SHARE: f64 = 0.5;
/// ... and stays busy until they use less than this share.
const CALM_SHARE: f64 = 0.35;
/// Clock ticks a second in `/proc/*/stat` (`USER_HZ`: 100 on Linux, on
/// every architecture, whatever the kernel's own tick).
#[cfg(target_os = "linux")]
const TICKS_PER_SECOND: u64 = 100;

/// Fetching's load, from samples of its CPU time. Pure: fed with samples.
#[derive(Debug)]
pub(crate) struct FetchLoad {
    cores: f64,
    last: Option<(u64, Millis)>,
    busy: bool,
}

impl FetchLoad {
    pub(crate) fn new(cores: usize) -> Self {
        Self {
            cores: cores.max(1) as f64,
            last: None,
            busy: false,
        }
    }

    /// Take a sample: fetching's CPU so far (ms; `None` where it cannot be
    /// known) at `now`. Whether fetching is busy.
    pub(crate) fn observe(&mut self, cpu_ms: Option<u64>, now: Millis) -> bool {
        let Some(cpu_ms) = cpu_ms else {
            self.busy = false;
            return false;
        };
        if let Some((last_cpu, last_at)) = self.last
            && now > last_at
        {
            // Threads that ended took their time with them: never below 0.
            let used = cpu_ms.saturating_sub(last_cpu) as f64 / (now - last_at) as f64;
            let share = used / self.cores;
            self.busy = if self.busy {
                share >= CALM_SHARE
            } else {
                share > BUSY_SHARE
            };
        }
        self.last = Some((cpu_ms, now));
        self.busy
    }

    pub(crate) fn busy(&self) -> bool {
        self.busy
    }
}

/// CPU time (ms) of this process's threads at normal priority, summed;
/// `None` off Linux.
pub(crate) fn fetching_cpu_ms() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        let mut ticks = 0;
        for task in std::fs::read_dir("/proc/self/task").ok()? {
            let Ok(task) = task else { continue };
            let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
                continue;
            };
            if let Some((cpu, nice)) = cpu_and_nice(&stat)
                && nice < 10
            {
                ticks += cpu;
            }
        }
        Some(ticks * 1000 / TICKS_PER_SECOND)
    }
    #[cfg(not(target_os = "linux"))]
    None
}

/// A thread's CPU ticks (user and system) and nice value, from its
/// `/proc/.../stat` line.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) fn cpu_and_nice(stat: &str) -> Option<(u64, i64)> {
    // The fields after the command's closing parenthesis (the command may
    // hold spaces and parentheses): state is the 1st of them, utime the
    // 12th, stime the 13th, nice the 17th.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let fields: Vec<&str> = rest.split(' ').collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    let nice: i64 = fields.get(16)?.parse().ok()?;
    Some((utime + stime, nice))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fetching_is_busy_above_half_the_cores_until_it_falls_below_a_third() {
        let mut load = FetchLoad::new(2);
        assert!(!load.observe(Some(0), 0), "one sample says nothing");
        assert!(!load.observe(Some(900), 1_000), "0.9 of 2 cores");
        assert!(load.observe(Some(2_600), 2_000), "1.7 of 2 cores");
        assert!(load.observe(Some(3_400), 3_000), "0.8: still busy");
        assert!(!load.observe(Some(3_900), 4_000), "0.5: calm");
        assert!(
            !load.observe(Some(100), 5_000),
            "threads gone: no time went backwards"
        );
        assert!(!load.observe(None, 6_000), "unknown: never busy");
        assert!(!load.busy());
    }

    #[test]
    fn a_stat_line_gives_cpu_and_nice() {
        let stat = "4242 (thrd (x) 1) S 1 2 3 4 5 6 7 8 9 10 150 25 0 0 20 10 4 0 100 0 0";
        assert_eq!(cpu_and_nice(stat), Some((175, 10)));
        assert_eq!(cpu_and_nice("garbage"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_busy_thread_at_normal_priority_counts_as_fetching() {
        let before = fetching_cpu_ms().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut x = 0u64;
        // Spin until the kernel has charged this thread a tick or more.
        while fetching_cpu_ms().unwrap() <= before {
            assert!(
                std::time::Instant::now() < deadline,
                "this thread's CPU is not counted"
            );
            for _ in 0..100_000 {
                x = x.wrapping_add(std::hint::black_box(1));
            }
        }
        assert!(x > 0);
    }
}
