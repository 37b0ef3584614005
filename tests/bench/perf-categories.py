"""Share of `perf script` samples whose stack holds a frame matching each category.

Used for the profile in docs/performance.md:
    perf script -i perf.data -F comm,tid,time,ip,sym > out.script
    python3 tests/bench/perf-categories.py out.script
A sample counts once per category (inclusive); categories overlap.
"""
import sys, re, collections

CATS = [
 ("SQLite, all", r"sqlite3_|sqlite3[A-Z]"),
 ("  SQL text parsed/prepared each call (sqlite3_prepare)", r"sqlite3_prepare|sqlite3LockAndPrepare"),
 ("  commit: WAL frames + write syscalls", r"vdbeCommit|pagerWalFrames|sqlite3PagerCommit"),
 ("  fsync/fdatasync", r"fsync|fdatasync|do_fsync|ext4_sync_file"),
 ("store: inbox_record", r"store::inbox::.*inbox_record"),
 ("store: finish_turn", r"finish_turn"),
 ("store: session_messages (history load)", r"session_messages"),
 ("store: session_open", r"session_open"),
 ("store: save_cursor", r"save_cursor|cursor"),
 ("store: outbox", r"store::outbox"),
 ("serde_json (build, serialize, parse)", r"serde_json"),
 ("agent: to_wire / request building", r"agent::to_wire|agent::.*build|trim_history"),
 ("HTTP client (hyper/reqwest, plain TCP)", r"hyper::|reqwest::|hyper_util::"),
 ("teloxide", r"teloxide"),
 ("Markdown -> HTML (pulldown_cmark)", r"pulldown_cmark|format::"),
 ("tracing", r"tracing::|tracing_subscriber|tracing_core"),
 ("malloc/free/realloc", r"^(_int_malloc|_int_free|malloc|cfree|free|realloc|_int_realloc|malloc_consolidate|unlink_chunk.*|__GI___libc_malloc|__libc_free)$"),
 ("kernel: scheduler / futex wake+park", r"finish_task_switch|futex_|schedule$|__schedule|try_to_wake_up"),
 ("kernel: all", r"^(entry_SYSCALL|asm_|__x64_sys|do_syscall_64)"),
 ("tokio park (idle→wake)", r"park_internal|park_timeout|Parker"),
 ("epoll/socket syscalls", r"epoll|tcp_|sock_|__sys_sendto|__sys_recvfrom|inet_"),
]
pats = [(n, re.compile(p)) for n, p in CATS]
samples = 0
inc = collections.Counter()
bythread = collections.Counter()
block = []
def flush():
    global samples, block
    if not block: return
    head, frames = block[0], block[1:]
    samples += 1
    bythread[head.split()[0]] += 1
    syms = [f.split(None, 1)[1] if len(f.split(None,1))>1 else "" for f in frames]
    for n, p in pats:
        if any(p.search(s) for s in syms):
            inc[n] += 1
    block = []
for line in open(sys.argv[1]):
    line = line.rstrip("\n")
    if not line.strip():
        flush(); continue
    block.append(line.strip())
flush()
print(f"samples: {samples}")
for t, c in bythread.most_common(): print(f"  thread {t}: {100*c/samples:.1f}%")
for n, _ in CATS:
    print(f"{100*inc[n]/samples:5.1f}%  {n}")
