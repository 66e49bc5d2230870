/* Internal profiler hooks (cft/profile.h is the public side): a layer
 * records an event when cft__prof() is true, timing it with
 * cft__prof_now(). Off, each hook costs one relaxed atomic load. */
#ifndef CFT_CORE_PROFILE_H
#define CFT_CORE_PROFILE_H

#include <stdatomic.h>
#include <stdbool.h>

extern _Atomic int cft__prof_on;
static inline bool cft__prof(void) {
    return __builtin_expect(atomic_load_explicit(&cft__prof_on, memory_order_relaxed), 0);
}
/* > 0 while a jitted plan runs on this thread: its steps are the events,
 * the eager primitives they call are not recorded again */
extern _Thread_local int cft__prof_in_plan;
/* microseconds on the monotonic clock */
double cft__prof_now(void);
/* an event from t0 (cft__prof_now) to now; name and args are copied;
 * cat: a static string ("fn", "kernel", "op", "trace", "compile", "comm");
 * args: JSON object members without the braces, or NULL */
void cft__prof_event(const char *name, const char *cat, double t0, const char *args);
/* the same on track `tid` of the trace instead of the calling thread's
 * (a device's track: cft__prof_track_name names it) */
void cft__prof_event_on(int tid, const char *name, const char *cat, double t0, const char *args);
/* an event on track `tid` from ts for dur microseconds, both given (a
 * device step timed by the device's own markers) */
void cft__prof_event_span(int tid, const char *name, const char *cat, double ts, double dur,
                          const char *args);
/* f runs when a recording stops, before it is written: a layer with
 * events still to resolve adds them then (array/device_count.c) */
void cft__prof_set_flush(void (*f)(void));
/* the name a track shows in the trace (once per track) */
void cft__prof_track_name(int tid, const char *name);
/* a counter's value now */
void cft__prof_counter(const char *name, double value);

#endif
