/*
 * Helpers shared by the fault-test drivers: status names, payloads, and
 * plain-text result lines.
 */
#ifndef FAULTS_COMMON_H
#define FAULTS_COMMON_H

#include <stdbool.h>
#include <stddef.h>

#include <tq.h>

/* "TQ_ERR_IO" and so on: the enum name, easier to grep than the description. */
const char *status_name(tq_status status);

/* The payload of task number `index`: a JSON object padded to about `size`
 * bytes, so that every task's payload is distinct and checkable. Written to
 * `buf` (at least size + 64 bytes); returns its length. */
size_t make_payload(char *buf, size_t bufsize, long index, size_t size);

/* Prints "what: message" on stderr and exits with status 2 (a harness
 * error, not a test verdict). */
_Noreturn void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Writes one line to fd 1 with a single write(2), so that the line shows up
 * whole in an strace log and is never lost in a stdio buffer if the
 * process dies right after. */
void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Whether the file exists. */
bool file_exists(const char *path);

#endif
