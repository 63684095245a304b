/* bench/floor/h1-floor.c: the least CPU an epoll HTTP/1.1 client can spend per request.
 *
 * Usage: h1-floor PORT CONNECTIONS SECONDS   (127.0.0.1 only; GET /, keep-alive)
 *
 * A reference for bench/run, not a load generator: one thread, one epoll loop, CONNECTIONS
 * keep-alive connections each with one request in flight, and nothing else. Per request it
 * makes one send and one recv, plus its share of one epoll_wait; it keeps no histogram, reads
 * the clock once per loop turn, not per request, parses only the status code and Content-Length, and has no timeouts,
 * retries or reconnects (any error ends it). Whatever CPU it spends per request is the
 * kernel's TCP work plus the least user work a client can do, so it shows how far below wrk
 * any client can get on this machine. Prints "N requests in S s, R req/s, E non-2xx".
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "floor.h"

struct conn {
  int fd;
  size_t fill;
  char buf[BUF];
};

static void die(const char *what) {
  perror(what);
  exit(1);
}

int main(int argc, char **argv) {
  struct floor_args args;
  int bad = parse_floor_args("h1-floor", argc, argv, 1 << 20, &args);
  if (bad) return bad;
  int n = args.n;
  const char *req = args.req;
  int req_len = args.req_len;
  int ep = epoll_create1(0);
  if (ep < 0) die("epoll_create1");
  struct conn *conns = calloc((size_t)n, sizeof *conns);
  if (!conns) die("calloc");
  for (int i = 0; i < n; i++) {
    int fd = floor_connect(&args);
    if (fd < 0) die("socket or connect");
    if (fcntl(fd, F_SETFL, O_NONBLOCK) < 0) die("fcntl");
    conns[i].fd = fd;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.ptr = &conns[i]};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) die("epoll_ctl");
  }
  long done = 0, non2xx = 0;
  double start = now(), deadline = start + args.seconds, end = start;
  for (int i = 0; i < n; i++)
    if (send(conns[i].fd, req, (size_t)req_len, 0) != req_len) die("send");
  struct epoll_event evs[256];
  int running = 1;
  while (running) {
    int k = epoll_wait(ep, evs, 256, 100);
    if (k < 0 && errno != EINTR) die("epoll_wait");
    for (int e = 0; e < k; e++) {
      struct conn *c = evs[e].data.ptr;
      for (;;) {
        ssize_t r = recv(c->fd, c->buf + c->fill, BUF - c->fill, 0);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (r <= 0) die("recv (the server closed or failed)");
        c->fill += (size_t)r;
        int status = 0;
        long used = response_len(c->buf, c->fill, &status);
        if (used < 0) {
          fprintf(stderr, "h1-floor: a response without Content-Length or over %d bytes\n", BUF);
          return 1;
        }
        if (used == 0) continue;
        done++;
        if (status < 200 || status > 299) non2xx++;
        memmove(c->buf, c->buf + used, c->fill - (size_t)used);
        c->fill -= (size_t)used;
        if (send(c->fd, req, (size_t)req_len, 0) != req_len) die("send");
        break; /* the next response comes after the next request: a new edge */
      }
    }
    end = now(); /* once per loop turn, which serves a batch of responses */
    if (end >= deadline) running = 0;
  }
  floor_report(done, end - start, non2xx);
  return 0;
}
