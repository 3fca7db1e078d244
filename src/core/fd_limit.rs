//! The process's limit on open files. An import keeps every input open from its verification to
//! its read-back (so that an input changed in between is caught), and a forced one a spill file
//! per input besides: the soft limit is raised to the hard one at start-up, and running out still
//! says what to do.

/// Raises the soft limit on open files to the hard limit (at most 1,048,576). Returns the soft
/// limit now in force, or `None` where it cannot be read.
pub fn raise_open_file_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        let mut lim = read_limit()?;
        let want = lim.rlim_max.min(1 << 20);
        if lim.rlim_cur < want {
            let raised = libc::rlimit {
                rlim_cur: want,
                rlim_max: lim.rlim_max,
            };
            // SAFETY: setrlimit reads the struct it is given; nothing else is touched.
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
                lim.rlim_cur = want;
            }
        }
        Some(lim.rlim_cur)
    }
    #[cfg(not(unix))]
    None
}

/// The soft limit on open files, if it can be read.
pub fn open_file_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        read_limit().map(|l| l.rlim_cur)
    }
    #[cfg(not(unix))]
    None
}

#[cfg(unix)]
fn read_limit() -> Option<libc::rlimit> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct it is given; nothing else is touched.
    (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0).then_some(lim)
}

/// Whether `e` is running out of file descriptors (the process's or the system's).
pub fn is_out_of_descriptors(e: &std::io::Error) -> bool {
    #[cfg(unix)]
    {
        matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
    }
    #[cfg(not(unix))]
    {
        let _ = e;
        false
    }
}

/// What to do when an open failed for want of descriptors (appended to the error).
pub fn out_of_descriptors_advice() -> String {
    let now = open_file_limit().map_or(String::new(), |n| format!(", now {n}"));
    format!(
        "every input stays open while it is imported: raise the limit on open files (`ulimit -n`{now}) or import the bundles in smaller groups"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_is_raised_to_the_hard_one_and_running_out_is_recognised() {
        let now = raise_open_file_limit().expect("a readable limit");
        assert_eq!(open_file_limit(), Some(now));
        let hard = read_limit().expect("limit").rlim_max;
        assert_eq!(now, hard.min(1 << 20));
        assert!(is_out_of_descriptors(&std::io::Error::from_raw_os_error(
            libc::EMFILE
        )));
        assert!(!is_out_of_descriptors(&std::io::Error::from_raw_os_error(
            libc::ENOENT
        )));
        assert!(out_of_descriptors_advice().contains(&format!("now {now}")));
    }
}
