/* progress.h - progress of reshardc's long passes on a terminal: one stderr line, redrawn in place, only when
 * stderr is a TTY and --quiet was not given (RESHARDC_PROGRESS=0 / 1 forces it off / on). Never on stdout. */
#ifndef RS_PROGRESS_H
#define RS_PROGRESS_H

#include <stdint.h>

/* Decide once per command: on when !quiet and stderr is a terminal (not TERM=dumb), or when
 * RESHARDC_PROGRESS=1 (then also when not a terminal: a line per second and one at the end of each phase,
 * for logs and tests). RESHARDC_PROGRESS_DELAY=S: a terminal shows phases longer than S seconds (0.5). */
void rs_progress_setup(int quiet);
int rs_progress_on(void);

/* Start a phase ("planning pass 2/3", "verifying"); total units of `unit` ("tensors"), 0 when unknown (the line
 * then shows the elapsed time only). Replaces the phase in progress, if any. */
void rs_progress_begin(const char *phase, uint64_t total, const char *unit);
/* done units so far: one relaxed atomic store. A ticker thread redraws the line ten times a second, from half a
 * second into the phase (forced mode: once a second, plus a final line at the end of each phase). */
void rs_progress_update(uint64_t done);
/* End the phase: the line is erased (forced mode: a final line with the count). */
void rs_progress_end(void);

#endif
