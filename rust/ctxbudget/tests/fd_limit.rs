//! One process serving many workspaces: dropping a `History` releases every descriptor
//! it held, lock file included. Its own test binary, because it lowers the process's
//! open-file limit.
use std::fs;

use ctxbudget::store::{Durability, OpenOptions};
use ctxbudget::transcript::History;
use ctxbudget::transcript::NewRow;

fn open_fds() -> usize {
    fs::read_dir("/proc/self/fd")
        .map(|d| d.count())
        .unwrap_or(0)
}

#[test]
fn three_hundred_workspaces_under_a_64_descriptor_limit() {
    let limit = libc::rlimit {
        rlim_cur: 64,
        rlim_max: libc::RLIM_INFINITY,
    };
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain system calls on valid pointers to stack values.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut old), 0);
        let limit = libc::rlimit {
            rlim_max: old.rlim_max,
            ..limit
        };
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
    }
    let root = std::env::temp_dir().join(format!("ctxb-fds-{}", std::process::id()));
    let before = open_fds();
    for i in 0..300 {
        let ws = root.join(format!("ws-{i}"));
        let h = History::open(
            &ws,
            OpenOptions {
                durability: Durability::None,
                ..OpenOptions::default()
            },
        )
        .unwrap_or_else(|e| panic!("workspace {i}: {e}"));
        h.append(vec![NewRow::text("message", "user", "hello")])
            .unwrap_or_else(|e| panic!("workspace {i}: {e}"));
        drop(h);
    }
    let after = open_fds();
    // SAFETY: as above.
    unsafe {
        libc::setrlimit(libc::RLIMIT_NOFILE, &old);
    }
    let _ = fs::remove_dir_all(&root);
    assert!(
        after <= before + 2,
        "{before} descriptors before, {after} after"
    );
}
