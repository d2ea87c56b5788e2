#define _POSIX_C_SOURCE 200809L

#include "common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *status_name(tq_status status)
{
    switch (status) {
    case TQ_OK: return "TQ_OK";
    case TQ_EMPTY: return "TQ_EMPTY";
    case TQ_DUPLICATE: return "TQ_DUPLICATE";
    case TQ_MERGED: return "TQ_MERGED";
    case TQ_SUSPENDED: return "TQ_SUSPENDED";
    case TQ_TIMEOUT: return "TQ_TIMEOUT";
    case TQ_ERR_INVALID_ARGUMENT: return "TQ_ERR_INVALID_ARGUMENT";
    case TQ_ERR_INVALID_JSON: return "TQ_ERR_INVALID_JSON";
    case TQ_ERR_NOT_HELD: return "TQ_ERR_NOT_HELD";
    case TQ_ERR_BUSY: return "TQ_ERR_BUSY";
    case TQ_ERR_IO: return "TQ_ERR_IO";
    case TQ_ERR_NOT_A_DATABASE: return "TQ_ERR_NOT_A_DATABASE";
    case TQ_ERR_INTERNAL: return "TQ_ERR_INTERNAL";
    case TQ_ERR_INTERRUPTED: return "TQ_ERR_INTERRUPTED";
    case TQ_ERR_UNKNOWN_OUTCOME: return "TQ_ERR_UNKNOWN_OUTCOME";
    case TQ_ERR_CANCELLED: return "TQ_ERR_CANCELLED";
    case TQ_ERR_FULL: return "TQ_ERR_FULL";
    }
    return "unknown-status";
}

size_t make_payload(char *buf, size_t bufsize, long index, size_t size)
{
    int n = snprintf(buf, bufsize, "{\"i\":%ld,\"pad\":\"", index);
    if (n < 0 || (size_t)n + 3 > bufsize)
        die("payload buffer too small");
    size_t len = (size_t)n;
    /* The padding varies with the index so no two payloads share a page
     * image by accident. */
    while (len + 2 < size && len + 3 < bufsize) {
        buf[len] = (char)('a' + (index + (long)len) % 26);
        len++;
    }
    buf[len++] = '"';
    buf[len++] = '}';
    buf[len] = '\0';
    return len;
}

void die(const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    vfprintf(stderr, fmt, args);
    va_end(args);
    fputc('\n', stderr);
    exit(2);
}

void say(const char *fmt, ...)
{
    char line[1024];
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, args);
    va_end(args);
    if (n < 0)
        return;
    if ((size_t)n > sizeof line - 2)
        n = (int)sizeof line - 2;
    /* One result per line, whatever a message holds. */
    for (int i = 0; i < n; i++)
        if (line[i] == '\n')
            line[i] = ' ';
    line[n++] = '\n';
    /* One write: a partial write of a short line to a pipe or file does
     * not happen in practice, and a lost line shows up in the checks. */
    if (write(1, line, (size_t)n) < 0) {
        /* Nothing better to do: stdout is gone. */
    }
}

bool file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}
