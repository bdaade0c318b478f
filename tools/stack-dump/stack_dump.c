// LD_PRELOAD'd by tools/gpu-check into the programs of its steps: gpu-check sends SIGUSR2
// to a step's processes once they have run long (a snapshot; they go on) and again when the
// step runs past its limit (before killing them). Each time, every thread of a process that
// gets it appends its stack to $GPU_CHECK_STACKS_DIR/stacks.<pid>.txt under a header with
// the time and the command line (frames as file(+offset), for addr2line against the
// unstripped build). A GPU machine is lent for minutes and has no debugger: a hang must
// come back with where it hung.
#define _GNU_SOURCE
#include <dirent.h>
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static char path[4096];
static volatile int printing = 0;

static void dump_this_thread(void) {
  void* frames[64];
  const int n = backtrace(frames, 64);
  while (__atomic_exchange_n(&printing, 1, __ATOMIC_ACQUIRE)) {
  }
  const int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    char head[64];
    const int len = snprintf(head, sizeof head, "--- thread %ld\n", (long)syscall(SYS_gettid));
    if (write(fd, head, (size_t)len) < 0) {
    }
    backtrace_symbols_fd(frames, n, fd);
    close(fd);
  }
  __atomic_store_n(&printing, 0, __ATOMIC_RELEASE);
}

// The header of one snapshot: when, and which program (its command line).
static void write_header(void) {
  const int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) return;
  char head[4200];
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  int len = snprintf(head, sizeof head, "=== snapshot at %ld.%03ld, pid %d:", (long)now.tv_sec, now.tv_nsec / 1000000,
                     (int)getpid());
  const int cmd = open("/proc/self/cmdline", O_RDONLY);
  if (cmd >= 0) {
    char args[4000];
    const ssize_t n = read(cmd, args, sizeof args - 1);
    close(cmd);
    for (ssize_t i = 0; i < n && len < (int)sizeof head - 2; ++i) head[len++] = args[i] ? args[i] : ' ';
  }
  head[len++] = '\n';
  if (write(fd, head, (size_t)len) < 0) {
  }
  close(fd);
}

// A signal from another process (gpu-check's kill) lands on one thread, which passes it to
// every other thread (tgkill, from this process: those only dump themselves).
static void on_signal(int sig, siginfo_t* info, void* context) {
  (void)sig;
  (void)context;
  const int relayed = info->si_code == SI_TKILL && info->si_pid == getpid();
  if (!relayed) {
    while (__atomic_exchange_n(&printing, 1, __ATOMIC_ACQUIRE)) {
    }
    write_header();
    __atomic_store_n(&printing, 0, __ATOMIC_RELEASE);
    const long self = syscall(SYS_gettid);
    DIR* d = opendir("/proc/self/task");
    struct dirent* e;
    while (d && (e = readdir(d))) {
      const long tid = atol(e->d_name);
      if (tid > 0 && tid != self) syscall(SYS_tgkill, getpid(), tid, SIGUSR2);
    }
    if (d) closedir(d);
  }
  dump_this_thread();
}

__attribute__((constructor)) static void install(void) {
  const char* dir = getenv("GPU_CHECK_STACKS_DIR");
  if (!dir || !*dir) return;
  snprintf(path, sizeof path, "%s/stacks.%d.txt", dir, (int)getpid());
  void* warm[2];
  backtrace(warm, 2);  // loads the unwinder now, not inside the handler
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_RESTART | SA_SIGINFO;  // a second SIGUSR2 waits: a thread never waits on its own dump
  sigaction(SIGUSR2, &sa, NULL);
}
