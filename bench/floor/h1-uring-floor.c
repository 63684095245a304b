/* bench/floor/h1-uring-floor.c: h1-floor.c's bare client on io_uring instead of epoll.
 *
 * Usage: h1-uring-floor PORT CONNECTIONS SECONDS   (127.0.0.1 only; GET /, keep-alive)
 *
 * The question it answers: would batching kernel work through io_uring lower the CPU a
 * request costs an HTTP/1.1 client on loopback, below what any epoll client can reach? It is
 * the most batched shape io_uring offers: one io_uring_enter per loop turn submits every
 * request the turn's responses freed and reaps every completion; each connection has one
 * multishot recv into a provided-buffer ring (armed once, not per request); sockets are
 * registered (fixed files: no fd lookup per operation); completions run only when we enter
 * the kernel (DEFER_TASKRUN, SINGLE_ISSUER). Like h1-floor it keeps no histogram, reads the
 * clock once per loop turn, parses only the status code and Content-Length, and has no
 * timeouts, retries or reconnects. Built with -luring (Debian: liburing-dev).
 * Prints "N requests in S s, R req/s, E non-2xx", as h1-floor does.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "floor.h"

#define NBUFS 1024 /* provided buffers: at least one per connection's response in flight */
#define BSZ 2048
#define GROUP 0

struct conn {
  size_t fill;
  char buf[BUF];
};

static struct io_uring ring;
static struct io_uring_buf_ring *bufs;
static char *buf_mem;
static struct conn *conns;
static struct floor_args args; /* the request sent on every connection, and where */

static void die(const char *what, int err) {
  fprintf(stderr, "h1-uring-floor: %s: %s\n", what, strerror(err));
  exit(1);
}

static struct io_uring_sqe *next_sqe(void) {
  struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
  if (!sqe) {
    io_uring_submit(&ring);
    sqe = io_uring_get_sqe(&ring);
  }
  return sqe;
}

/* Sends connection i's request; a send that succeeds posts no completion. */
static void queue_send(int i) {
  struct io_uring_sqe *sqe = next_sqe();
  io_uring_prep_send(sqe, i, args.req, (size_t)args.req_len, 0);
  sqe->flags |= IOSQE_FIXED_FILE | IOSQE_CQE_SKIP_SUCCESS;
  io_uring_sqe_set_data64(sqe, (__u64)i | (1ULL << 32));
}

/* Arms connection i's multishot recv: one completion per arrival until it ends. */
static void queue_recv(int i) {
  struct io_uring_sqe *sqe = next_sqe();
  io_uring_prep_recv_multishot(sqe, i, NULL, 0, 0);
  sqe->flags |= IOSQE_FIXED_FILE | IOSQE_BUFFER_SELECT;
  sqe->buf_group = GROUP;
  io_uring_sqe_set_data64(sqe, (__u64)i);
}

static void setup_buffers(void) {
  bufs = mmap(NULL, NBUFS * sizeof(struct io_uring_buf), PROT_READ | PROT_WRITE,
              MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
  buf_mem = malloc((size_t)NBUFS * BSZ);
  if (bufs == MAP_FAILED || !buf_mem) die("buffers", ENOMEM);
  struct io_uring_buf_reg reg = {.ring_addr = (unsigned long)bufs, .ring_entries = NBUFS, .bgid = GROUP};
  int err = io_uring_register_buf_ring(&ring, &reg, 0);
  if (err) die("io_uring_register_buf_ring", -err);
  io_uring_buf_ring_init(bufs);
  for (int b = 0; b < NBUFS; b++)
    io_uring_buf_ring_add(bufs, buf_mem + (size_t)b * BSZ, BSZ, (unsigned short)b,
                          io_uring_buf_ring_mask(NBUFS), b);
  io_uring_buf_ring_advance(bufs, NBUFS);
}

/* One recv completion for connection i: takes its bytes, answers a whole response with the
 * next request. Returns 1 for a response completed, 0 otherwise; *non2xx counts the others. */
static int on_recv(struct io_uring_cqe *cqe, int i, long *non2xx) {
  if (cqe->res <= 0) die("recv (the server closed or failed)", cqe->res < 0 ? -cqe->res : EPIPE);
  struct conn *c = &conns[i];
  int bid = (int)(cqe->flags >> IORING_CQE_BUFFER_SHIFT);
  size_t got = (size_t)cqe->res;
  if (c->fill + got > BUF) die("response", E2BIG);
  memcpy(c->buf + c->fill, buf_mem + (size_t)bid * BSZ, got);
  c->fill += got;
  io_uring_buf_ring_add(bufs, buf_mem + (size_t)bid * BSZ, BSZ, (unsigned short)bid,
                        io_uring_buf_ring_mask(NBUFS), 0);
  io_uring_buf_ring_advance(bufs, 1);
  if (!(cqe->flags & IORING_CQE_F_MORE)) queue_recv(i); /* the kernel ended it: re-arm */
  int status = 0;
  long used = response_len(c->buf, c->fill, &status);
  if (used < 0) {
    fprintf(stderr, "h1-uring-floor: a response without Content-Length or over %d bytes\n", BUF);
    exit(1);
  }
  if (used == 0) return 0;
  if (status < 200 || status > 299) (*non2xx)++;
  memmove(c->buf, c->buf + used, c->fill - (size_t)used);
  c->fill -= (size_t)used;
  queue_send(i);
  return 1;
}

int main(int argc, char **argv) {
  int bad = parse_floor_args("h1-uring-floor", argc, argv, NBUFS / 2, &args);
  if (bad) return bad;
  int n = args.n;
  struct io_uring_params params = {0};
  params.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_COOP_TASKRUN;
  int err = io_uring_queue_init_params(1024, &ring, &params);
  if (err) die("io_uring_queue_init (io_uring disabled or too old a kernel?)", -err);
  setup_buffers();
  conns = calloc((size_t)n, sizeof *conns);
  int *fds = calloc((size_t)n, sizeof *fds);
  if (!conns || !fds) die("calloc", ENOMEM);
  for (int i = 0; i < n; i++) {
    fds[i] = floor_connect(&args);
    if (fds[i] < 0) die("socket or connect", errno);
  }
  err = io_uring_register_files(&ring, fds, (unsigned)n);
  if (err) die("io_uring_register_files", -err);
  for (int i = 0; i < n; i++) {
    queue_recv(i);
    queue_send(i);
  }
  long done = 0, non2xx = 0;
  double start = now(), deadline = start + args.seconds, end = start;
  while (end < deadline) {
    err = io_uring_submit_and_wait(&ring, 1);
    if (err < 0 && err != -EINTR && err != -ETIME) die("io_uring_submit_and_wait", -err);
    struct io_uring_cqe *cqe;
    unsigned head, seen = 0;
    io_uring_for_each_cqe(&ring, head, cqe) {
      seen++;
      __u64 data = io_uring_cqe_get_data64(cqe);
      if (data >> 32) die("send", cqe->res < 0 ? -cqe->res : EIO); /* only failed sends post */
      done += on_recv(cqe, (int)data, &non2xx);
    }
    io_uring_cq_advance(&ring, seen);
    end = now(); /* once per loop turn, which serves a batch of responses */
  }
  floor_report(done, end - start, non2xx);
  return 0;
}
