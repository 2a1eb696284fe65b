#include "advise_pool.h"
#include "error.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
  pid_t pid; /* 0: free slot */
  int fd;    /* read end of the worker's pipe */
  int item;
  guint64 seq; /* spawn order */
} Worker;

struct RfPool {
  int jobs, running;
  guint64 spawned;
  size_t result_bytes;
  RfPoolFn fn;
  void *ud;
  Worker *w;
  void *result; /* a worker's block, allocated here: the child allocates nothing (worker_main) */
};

RfPool *rf_pool_new(int jobs, size_t result_bytes, RfPoolFn fn, void *ud) {
  RfPool *p = g_new0(RfPool, 1);
  p->jobs = jobs > 0 ? jobs : 1;
  p->result_bytes = result_bytes;
  p->fn = fn;
  p->ud = ud;
  p->w = g_new0(Worker, p->jobs);
  p->result = g_malloc0(result_bytes ? result_bytes : 1);
  return p;
}

void rf_pool_free(RfPool *p) {
  if (!p) return;
  void *scratch = g_malloc(p->result_bytes ? p->result_bytes : 1);
  while (p->running > 0) {
    GError *e = NULL;
    rf_pool_wait(p, scratch, &e);
    g_clear_error(&e);
  }
  g_free(scratch);
  g_free(p->result);
  g_free(p->w);
  g_free(p);
}

int rf_pool_running(const RfPool *p) {
  return p->running;
}

gboolean rf_pool_full(const RfPool *p) {
  return p->running >= p->jobs;
}

/* The child: run the item, send its block, leave without atexit handlers or stdio flushes of
 * the parent's buffers. */
static G_GNUC_NORETURN void worker_main(RfPool *p, int item, int fd) {
  /* no allocation of its own here: a child forked while another thread of the parent held the
   * allocator's lock waits for it forever (ASan's allocator does not take it across fork(), as
   * glibc's does; tests/test_advise_search.c's shards fork from threads and hung so about one
   * run in six); the block is the pool's, this process's copy of it */
  void *result = p->result;
  memset(result, 0, p->result_bytes);
  p->fn(item, result, p->ud);
  const char *b = result;
  size_t left = p->result_bytes;
  int status = 0;
  while (left > 0) {
    ssize_t n = write(fd, b, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      status = 1;
      break;
    }
    b += n;
    left -= (size_t)n;
  }
  _exit(status);
}

gboolean rf_pool_spawn(RfPool *p, int item, GError **error) {
  int slot = -1;
  for (int j = 0; j < p->jobs; j++)
    if (!p->w[j].pid) slot = j;
  if (slot < 0) {
    g_set_error(error, RF_ERROR, RF_ERROR_IO, "worker pool: all %d workers busy", p->jobs);
    return FALSE;
  }
  int fds[2];
  if (pipe(fds) != 0) {
    g_set_error(error, RF_ERROR, RF_ERROR_IO, "pipe: %s", g_strerror(errno));
    return FALSE;
  }
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    g_set_error(error, RF_ERROR, RF_ERROR_IO, "fork: %s", g_strerror(errno));
    close(fds[0]);
    close(fds[1]);
    return FALSE;
  }
  if (pid == 0) {
    close(fds[0]);
    worker_main(p, item, fds[1]);
  }
  close(fds[1]);
  p->w[slot] = (Worker){pid, fds[0], item, p->spawned++};
  p->running++;
  return TRUE;
}

/* Read the whole block, or as much as the worker sent before its pipe closed. */
static size_t read_block(int fd, void *result, size_t bytes) {
  char *b = result;
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = read(fd, b + got, bytes - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += (size_t)n;
  }
  return got;
}

int rf_pool_wait(RfPool *p, void *result, GError **died) {
  if (p->running == 0) return -1;
  /* a worker's pipe turns readable when it has sent its block or has died (end of file): wait on
   * this pool's pipes, not on any child of the process */
  struct pollfd *pf = g_new(struct pollfd, p->jobs);
  int *slot = g_new(int, p->jobs), n = 0, j = -1;
  for (int i = 0; i < p->jobs; i++)
    if (p->w[i].pid) {
      pf[n] = (struct pollfd){.fd = p->w[i].fd, .events = POLLIN};
      slot[n++] = i;
    }
  while (j < 0) {
    if (poll(pf, (nfds_t)n, -1) < 0) {
      if (errno == EINTR) continue;
      j = slot[0]; /* cannot happen with valid descriptors: take the first, its read says */
      break;
    }
    /* of those that have ended, the oldest first (as wait(2) reaps a process's children) */
    for (int i = 0; i < n; i++)
      if (pf[i].revents && (j < 0 || p->w[slot[i]].seq < p->w[j].seq)) j = slot[i];
  }
  g_free(pf);
  g_free(slot);
  Worker *w = &p->w[j];
  memset(result, 0, p->result_bytes);
  size_t got = read_block(w->fd, result, p->result_bytes);
  close(w->fd);
  int status = 0;
  while (waitpid(w->pid, &status, 0) < 0 && errno == EINTR)
    ;
  if (got != p->result_bytes) {
    memset(result, 0, p->result_bytes);
    g_set_error(died, RF_ERROR, RF_ERROR_IO, "worker died (status %d)", status);
  }
  int item = w->item;
  *w = (Worker){0};
  p->running--;
  return item;
}
