/* test_graph.h: the test backend's recordings (tests/support/test_graph.c),
 * its begin_capture ... release_graph. */
#ifndef TEST_GRAPH_H
#define TEST_GRAPH_H

#include <stdbool.h>
#include <stddef.h>

#include "array/device_plugin.h"

/* how a replay runs what was recorded (the backend's own functions) */
typedef struct {
    int (*kernel)(const cft_dev_kernel *k);
    int (*op)(const cft_dev_op_api *api, const cft_dev_op *op); /* 1: done */
    int (*copy)(void *dst, const void *src, size_t bytes);
} test_graph_exec;

/* Starts recording this thread's work for device dev; 0, or -1 if it
 * records already. */
int test_graph_begin(int dev);
/* Whether this thread records. */
bool test_graph_recording(void);
/* Record a kernel, an operation (its operands and parameters copied), a
 * copy between device buffers; 0, or -1 out of memory (spoils it). */
int test_graph_kernel(const cft_dev_kernel *k);
int test_graph_op(const cft_dev_op_api *api, const cft_dev_op *op);
int test_graph_copy(void *dst, const void *src, size_t bytes);
/* Something that cannot be recorded happened: the recording fails. */
void test_graph_spoil(const char *what);
/* Ends recording: 0 with the recording in *graph, or -1 (spoiled: why
 * says what spoiled it). */
int test_graph_end(void **graph);
const char *test_graph_why(void);
/* Replays a recording in order; 0, or -1 when a step failed. */
int test_graph_launch(void *graph, const test_graph_exec *x);
void test_graph_release(void *graph);

#endif
