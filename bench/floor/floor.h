/* bench/floor/floor.h: what the two floor clients (h1-floor.c on epoll, h1-uring-floor.c on
 * io_uring) share: the clock and the least response parsing a client can do. */
#ifndef HTTPVS_FLOOR_H
#define HTTPVS_FLOOR_H

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

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

#endif
