/* bench/floor/floor.h: what the two floor clients (h1-floor.c on epoll, h1-uring-floor.c on
 * io_uring) share: their arguments, connecting, the clock, the least response parsing a client
 * can do, and the result line. */
#ifndef HTTPVS_FLOOR_H
#define HTTPVS_FLOOR_H

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Most bytes a connection buffers: a response must fit. */
#define BUF 16384

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

/* Length of the whole response at the start of buf, 0 if not all there yet, -1 if unusable. */
static long response_len(const char *buf, size_t fill, int *status) {
  const char *end = memmem(buf, fill, "\r\n\r\n", 4);
  if (!end) return fill >= BUF ? -1 : 0;
  size_t head = (size_t)(end - buf) + 4;
  if (fill < 12) return -1;
  *status = atoi(buf + 9);
  long body = -1;
  for (const char *p = buf; p && p < end;) {
    const char *line = memchr(p, '\n', (size_t)(end - p));
    if (!line) break;
    line++;
    if (strncasecmp(line, "content-length:", 15) == 0) body = atol(line + 15);
    p = line;
  }
  if (body < 0) return -1; /* chunked or close-delimited: not for this reference */
  return fill >= head + (size_t)body ? (long)(head + (size_t)body) : 0;
}

/* What a floor is told (PORT CONNECTIONS SECONDS) and the request and address that follow. */
struct floor_args {
  int port, n;
  double seconds;
  char req[128];
  int req_len;
  struct sockaddr_in addr;
};

/* A whole decimal number in [1, max] from text, or -1. */
static long floor_count(const char *text, long max) {
  char *end;
  errno = 0;
  long v = strtol(text, &end, 10);
  return errno == 0 && end != text && *end == '\0' && v >= 1 && v <= max ? v : -1;
}

/* Parses argv into a; on bad input prints why and returns 2 (the exit status), else 0. */
static int parse_floor_args(const char *name, int argc, char **argv, int max_conns,
                            struct floor_args *a) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s PORT CONNECTIONS SECONDS\n", name);
    return 2;
  }
  char *end;
  long port = floor_count(argv[1], 65535), n = floor_count(argv[2], max_conns);
  double seconds = strtod(argv[3], &end);
  if (port < 0 || n < 0 || end == argv[3] || *end != '\0' || !isfinite(seconds) ||
      !(seconds > 0)) {
    fprintf(stderr, "%s: bad arguments (a port, 1 to %d connections, seconds > 0)\n", name,
            max_conns);
    return 2;
  }
  a->port = (int)port;
  a->n = (int)n;
  a->seconds = seconds;
  a->req_len =
      snprintf(a->req, sizeof a->req, "GET / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", a->port);
  memset(&a->addr, 0, sizeof a->addr);
  a->addr.sin_family = AF_INET;
  a->addr.sin_port = htons((unsigned short)a->port);
  a->addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return 0;
}

/* One blocking connect to the floor's address with TCP_NODELAY; the socket, or -1 (errno set). */
static int floor_connect(const struct floor_args *a) {
  int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  if (fd < 0) return -1;
  if (connect(fd, (const struct sockaddr *)&a->addr, sizeof a->addr) < 0) {
    int e = errno; /* close may change it */
    close(fd);
    errno = e;
    return -1;
  }
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

/* The line bench/count.py reads. */
static void floor_report(long done, double elapsed, long non2xx) {
  printf("%ld requests in %.3f s, %.0f req/s, %ld non-2xx\n", done, elapsed, done / elapsed,
         non2xx);
}

#endif
