// LD_PRELOAD'd by tools/gpu-check into the programs of its steps: when a step runs past its
// limit, gpu-check sends SIGUSR2 to each of its processes before killing them, and every
// thread of a process that gets it appends its stack to $GPU_CHECK_STACKS_DIR/stacks.<pid>.txt
// (frames as file(+offset), for addr2line against the unstripped build). A GPU machine is
// lent for minutes and has no debugger: a hang must come back with where it hung.
#define _GNU_SOURCE
#include <dirent.h>
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static char path[4096];
static volatile int relaying = 0;
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

// The thread the process-directed signal landed on passes it to every other thread.
static void on_signal(int sig) {
  (void)sig;
  if (!__atomic_exchange_n(&relaying, 1, __ATOMIC_ACQ_REL)) {
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
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;  // a second SIGUSR2 waits: a thread never waits on its own dump
  sigaction(SIGUSR2, &sa, NULL);
}
