// The host's own jitter floor (benchmark tool, not part of Headroom): one thread spins on one CPU
// for a while, reading the monotonic clock in a tight loop, and counts how often and for how long
// it did not get to run (a gap between two consecutive reads). Whatever takes the CPU away (the
// kernel's own threads, interrupts, other processes, the hypervisor) shows up as a gap. A decode
// step whose threads meet at barriers pays every such gap on any of its CPUs, so no server can keep
// a stream's worst inter-token gap below what this measures on the same host.
//
//   cc -O2 -o jitter jitter.c && ./jitter <seconds> [label]
// Prints one JSON line: the gaps over 0.5, 1, 2, 5, 10, 20 and 40 ms, the largest, and the time lost
// in gaps over 0.5 ms.
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: jitter <seconds> [label]\n");
    return 2;
  }
  const double seconds = atof(argv[1]);
  const char* label = argc > 2 ? argv[2] : "";
  static const double edges[] = {0.5, 1, 2, 5, 10, 20, 40};
  enum { N_EDGES = sizeof edges / sizeof edges[0] };
  long over[N_EDGES] = {0};
  double largest = 0, lost = 0;
  const double start = now_ms();
  double prev = start;
  for (;;) {
    const double t = now_ms();
    const double gap = t - prev;
    prev = t;
    if (gap > largest) largest = gap;
    if (gap > edges[0]) lost += gap;
    for (int i = 0; i < N_EDGES; i++) if (gap > edges[i]) over[i]++;
    if (t - start >= seconds * 1e3) break;
  }
  printf("{\"label\":\"%s\",\"seconds\":%.1f,\"maxMs\":%.2f,\"lostMs\":%.1f,\"over\":{", label, seconds, largest, lost);
  for (int i = 0; i < N_EDGES; i++) printf("%s\"%g\":%ld", i ? "," : "", edges[i], over[i]);
  printf("}}\n");
  return 0;
}
