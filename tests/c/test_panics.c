/*
 * No panic crosses into C. Linked against a libtq built with the test-only
 * `panic-injection` feature: with TQ_INJECT_PANIC naming a function, that
 * function panics inside tq. Each exported function must then return
 * TQ_ERR_INTERNAL (or its neutral value), leave a message naming it, and
 * leave the process and the queue working.
 *
 * Ends with "N passed, N failed", counting functions.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tq.h>

static int passed, failed;

/* Arms the panic for `function` (NULL: none). */
static void inject(const char *function)
{
    if (function)
        setenv("TQ_INJECT_PANIC", function, 1);
    else
        unsetenv("TQ_INJECT_PANIC");
}

/* Records whether the injected panic in `function` was caught: `caught` is
 * the check on its return value, and the thread's message must name it. */
static void verdict(const char *function, bool caught)
{
    inject(NULL);
    char expected[128];
    snprintf(expected, sizeof expected, "internal error in %s: injected panic", function);
    bool named = strstr(tq_last_error(), expected) != NULL;
    if (caught && named) {
        passed++;
    } else {
        failed++;
        printf("%s: return value %s, last error \"%s\"\n", function, caught ? "ok" : "WRONG", tq_last_error());
    }
}

#define STATUS_CASE(function, call)                                  \
    do {                                                             \
        inject(#function);                                           \
        tq_status status_ = (call);                                  \
        verdict(#function, status_ == TQ_ERR_INTERNAL);              \
    } while (0)

#define VALUE_CASE(function, call, neutral)                          \
    do {                                                             \
        inject(#function);                                           \
        bool caught_ = (call) == (neutral);                          \
        verdict(#function, caught_);                                 \
    } while (0)

int main(int argc, char **argv)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tq-panics-%ld.db", argc > 1 ? argv[1] : "/tmp", (long)getpid());
    inject(NULL);

    tq_queue *queue = NULL;
    if (tq_open(path, NULL, &queue) != TQ_OK) {
        printf("setup: tq_open: %s\n", tq_last_error());
        return 1;
    }
    tq_push(queue, "1", 1, NULL, NULL);
    tq_task *task = NULL;
    tq_pull(queue, NULL, &task);
    tq_options *options = tq_options_new();
    tq_push_options *push_options = tq_push_options_new();
    tq_pull_options *pull_options = tq_pull_options_new();
    if (!task || !options || !push_options || !pull_options) {
        printf("setup failed: %s\n", tq_last_error());
        return 1;
    }
    int64_t n = 0;
    tq_queue *unopened = NULL;
    tq_task *unpulled = NULL;

    STATUS_CASE(tq_open, tq_open(path, NULL, &unopened));
    STATUS_CASE(tq_push, tq_push(queue, "2", 1, NULL, NULL));
    STATUS_CASE(tq_pull, tq_pull(queue, NULL, &unpulled));
    STATUS_CASE(tq_finish, tq_finish(queue, task));
    STATUS_CASE(tq_recover, tq_recover(queue, &n));
    STATUS_CASE(tq_count, tq_count(queue, TQ_STATE_PENDING, &n));
    STATUS_CASE(tq_purge, tq_purge(queue, TQ_STATE_DONE, 0, &n));
    const char *payloads[] = {"4"};
    size_t lens[] = {1};
    size_t count = 0;
    tq_task *tasks[] = {task};
    tq_cancel *cancel = tq_cancel_new();
    STATUS_CASE(tq_push_batch, tq_push_batch(queue, payloads, lens, 1, NULL, NULL));
    STATUS_CASE(tq_pull_batch, tq_pull_batch(queue, NULL, 1, &unpulled, &count));
    STATUS_CASE(tq_finish_batch, tq_finish_batch(queue, tasks, 1, NULL));
    STATUS_CASE(tq_finish_and_pull, tq_finish_and_pull(queue, task, NULL, &unpulled));
    STATUS_CASE(tq_finish_and_pull_batch,
                tq_finish_and_pull_batch(queue, tasks, 1, NULL, NULL, 1, &unpulled, &count));
    STATUS_CASE(tq_fail, tq_fail(queue, task, "no"));
    STATUS_CASE(tq_extend, tq_extend(queue, task, 1000));
    STATUS_CASE(tq_extend_with_progress, tq_extend_with_progress(queue, task, 1000, "1"));
    STATUS_CASE(tq_finish_with_result, tq_finish_with_result(queue, task, "1"));
    STATUS_CASE(tq_get_task, tq_get_task(queue, 1, &unpulled));
    char *output = NULL;
    STATUS_CASE(tq_step_put, tq_step_put(queue, task, "s", "1"));
    STATUS_CASE(tq_step_get, tq_step_get(queue, task, "s", &output));
    STATUS_CASE(tq_clear_steps_after, tq_clear_steps_after(queue, 1, "s", NULL));
    tq_step_put(queue, task, "kept", "2");
    tq_step_get(queue, task, "kept", &output);
    inject("tq_string_free");
    tq_string_free(output);
    verdict("tq_string_free", true);
    tq_string_free(output);
    STATUS_CASE(tq_wait_task, tq_wait_task(queue, 1, 0, NULL, &unpulled));
    STATUS_CASE(tq_retry_dead, tq_retry_dead(queue, 1));
    STATUS_CASE(tq_retry_all_dead, tq_retry_all_dead(queue, &n));
    int32_t state = 0;
    STATUS_CASE(tq_cancel_task, tq_cancel_task(queue, 1, "no", &state));
    STATUS_CASE(tq_snooze, tq_snooze(queue, task, 0));
    STATUS_CASE(tq_wait_cancellation, tq_wait_cancellation(queue, task, 0, cancel));
    uint64_t mark = 0;
    STATUS_CASE(tq_wait_change, tq_wait_change(queue, 0, 0, cancel, &mark));
    STATUS_CASE(tq_pause, tq_pause(queue, TQ_UNTIL_RESUMED));
    STATUS_CASE(tq_resume, tq_resume(queue));
    STATUS_CASE(tq_paused_until, tq_paused_until(queue, &n));
    uint32_t limit = 0;
    STATUS_CASE(tq_set_concurrency_limit, tq_set_concurrency_limit(queue, 4));
    STATUS_CASE(tq_clear_concurrency_limit, tq_clear_concurrency_limit(queue));
    STATUS_CASE(tq_concurrency_limit, tq_concurrency_limit(queue, &limit));
    uint64_t cap = 0;
    double weight = 0;
    STATUS_CASE(tq_set_max_pending, tq_set_max_pending(queue, 4));
    STATUS_CASE(tq_max_pending, tq_max_pending(queue, &cap));
    STATUS_CASE(tq_set_max_pending_per_key, tq_set_max_pending_per_key(queue, 4));
    STATUS_CASE(tq_max_pending_per_key, tq_max_pending_per_key(queue, &cap));
    STATUS_CASE(tq_set_key_max_pending, tq_set_key_max_pending(queue, "k", 4));
    STATUS_CASE(tq_key_max_pending, tq_key_max_pending(queue, "k", &cap));
    STATUS_CASE(tq_set_fair_weight, tq_set_fair_weight(queue, "k", 2.0));
    STATUS_CASE(tq_fair_weight, tq_fair_weight(queue, "k", &weight));
    uint64_t per_ms = 0;
    STATUS_CASE(tq_set_rate_limit, tq_set_rate_limit(queue, 10, 1000));
    STATUS_CASE(tq_clear_rate_limit, tq_clear_rate_limit(queue));
    STATUS_CASE(tq_rate_limit, tq_rate_limit(queue, &limit, &per_ms));
    STATUS_CASE(tq_oldest_ready_age_ms, tq_oldest_ready_age_ms(queue, &n));
    STATUS_CASE(tq_groups_waiting, tq_groups_waiting(queue, &n));
    STATUS_CASE(tq_list, tq_list(queue, TQ_STATE_PENDING, 0, 1, &unpulled, &count));
    STATUS_CASE(tq_checkpoint, tq_checkpoint(queue, &n));
    STATUS_CASE(tq_wal_size, tq_wal_size(queue, &n));
    STATUS_CASE(tq_interrupt, tq_interrupt(queue));
    tq_schedule_options *schedule_options = tq_schedule_options_new();
    STATUS_CASE(tq_schedule_options_set_every_ms, tq_schedule_options_set_every_ms(schedule_options, 3600000));
    STATUS_CASE(tq_schedule_options_set_cron, tq_schedule_options_set_cron(schedule_options, "@daily"));
    STATUS_CASE(tq_schedule_options_set_time_zone, tq_schedule_options_set_time_zone(schedule_options, "UTC"));
    STATUS_CASE(tq_schedule_options_set_priority, tq_schedule_options_set_priority(schedule_options, 1));
    STATUS_CASE(tq_schedule_options_set_max_attempts, tq_schedule_options_set_max_attempts(schedule_options, 1));
    STATUS_CASE(tq_schedule_options_set_catch_up, tq_schedule_options_set_catch_up(schedule_options, TQ_CATCH_UP_ONE, 1));
    STATUS_CASE(tq_schedule_add, tq_schedule_add(queue, "s", "1", 1, schedule_options));
    STATUS_CASE(tq_schedule_replace, tq_schedule_replace(queue, "s", "1", 1, schedule_options));
    STATUS_CASE(tq_schedule_upsert, tq_schedule_upsert(queue, "s", "1", 1, schedule_options));
    STATUS_CASE(tq_schedule_pause, tq_schedule_pause(queue, "s"));
    STATUS_CASE(tq_schedule_resume, tq_schedule_resume(queue, "s"));
    STATUS_CASE(tq_run_due_schedules, tq_run_due_schedules(queue, &n));
    tq_schedule *schedule = NULL;
    STATUS_CASE(tq_schedules, tq_schedules(queue, NULL, 1, &schedule, &count));
    tq_schedule_add(queue, "s", "1", 1, schedule_options);
    tq_schedules(queue, NULL, 1, &schedule, &count);
    VALUE_CASE(tq_schedule_name, tq_schedule_name(schedule), NULL);
    VALUE_CASE(tq_schedule_cron, tq_schedule_cron(schedule), NULL);
    VALUE_CASE(tq_schedule_every_ms, tq_schedule_every_ms(schedule), 0u);
    VALUE_CASE(tq_schedule_time_zone, tq_schedule_time_zone(schedule), NULL);
    VALUE_CASE(tq_schedule_payload, tq_schedule_payload(schedule, NULL), NULL);
    VALUE_CASE(tq_schedule_priority, tq_schedule_priority(schedule), 0);
    VALUE_CASE(tq_schedule_max_attempts, tq_schedule_max_attempts(schedule), 0u);
    VALUE_CASE(tq_schedule_catch_up, tq_schedule_catch_up(schedule, NULL), -1);
    VALUE_CASE(tq_schedule_paused, tq_schedule_paused(schedule), false);
    VALUE_CASE(tq_schedule_next_slot_unix_ms, tq_schedule_next_slot_unix_ms(schedule), 0);
    inject("tq_schedule_free");
    tq_schedule_free(schedule);
    verdict("tq_schedule_free", true);
    tq_schedule_free(schedule);
    STATUS_CASE(tq_schedule_remove, tq_schedule_remove(queue, "s"));
    tq_schedule_remove(queue, "s");
    VALUE_CASE(tq_schedule_options_new, tq_schedule_options_new(), NULL);
    inject("tq_schedule_options_free");
    tq_schedule_options_free(schedule_options);
    verdict("tq_schedule_options_free", true);
    tq_schedule_options_free(schedule_options);
    STATUS_CASE(tq_options_set_queue, tq_options_set_queue(options, "q"));
    STATUS_CASE(tq_options_set_max_attempts, tq_options_set_max_attempts(options, 3));
    STATUS_CASE(tq_options_set_retry_backoff_ms, tq_options_set_retry_backoff_ms(options, 1, 2));
    STATUS_CASE(tq_push_options_set_priority, tq_push_options_set_priority(push_options, 1));
    STATUS_CASE(tq_push_options_set_max_attempts, tq_push_options_set_max_attempts(push_options, 1));
    STATUS_CASE(tq_push_options_set_unique_key, tq_push_options_set_unique_key(push_options, "k"));
    STATUS_CASE(tq_push_options_set_unique_for_ms, tq_push_options_set_unique_for_ms(push_options, 1));
    STATUS_CASE(tq_push_options_set_replace_pending, tq_push_options_set_replace_pending(push_options, true));
    STATUS_CASE(tq_push_options_set_debounce_ms, tq_push_options_set_debounce_ms(push_options, 1));
    STATUS_CASE(tq_push_options_set_group, tq_push_options_set_group(push_options, "g", 1));
    STATUS_CASE(tq_push_options_set_fair_key, tq_push_options_set_fair_key(push_options, "k"));
    STATUS_CASE(tq_pull_options_set_wait_ms, tq_pull_options_set_wait_ms(pull_options, 1));
    STATUS_CASE(tq_pull_options_set_cancel, tq_pull_options_set_cancel(pull_options, cancel));
    STATUS_CASE(tq_cancel_trigger, tq_cancel_trigger(cancel));
    STATUS_CASE(tq_location_redacted, tq_location_redacted("jobs.db", NULL, 0, NULL));
    STATUS_CASE(tq_options_set_durability, tq_options_set_durability(options, TQ_DURABILITY_NORMAL));
    STATUS_CASE(tq_options_set_busy_timeout_ms, tq_options_set_busy_timeout_ms(options, 10));
    STATUS_CASE(tq_options_set_keep_history, tq_options_set_keep_history(options, true));
    STATUS_CASE(tq_options_set_max_payload_len, tq_options_set_max_payload_len(options, 10));
    STATUS_CASE(tq_options_set_pool_size, tq_options_set_pool_size(options, 2));
    STATUS_CASE(tq_options_set_result_retention_ms, tq_options_set_result_retention_ms(options, 10));
    STATUS_CASE(tq_options_set_postgres_schema, tq_options_set_postgres_schema(options, "jobs"));
    STATUS_CASE(tq_push_options_set_delay_ms, tq_push_options_set_delay_ms(push_options, 10));
    STATUS_CASE(tq_push_options_set_wait_for_room_ms,
                tq_push_options_set_wait_for_room_ms(push_options, 10));
    STATUS_CASE(tq_push_options_set_run_at_unix_ms, tq_push_options_set_run_at_unix_ms(push_options, 10));
    STATUS_CASE(tq_push_options_set_expire_after_ms, tq_push_options_set_expire_after_ms(push_options, 10));
    STATUS_CASE(tq_push_options_set_expire_at_unix_ms, tq_push_options_set_expire_at_unix_ms(push_options, 10));
    STATUS_CASE(tq_push_options_set_deadline_after_ms, tq_push_options_set_deadline_after_ms(push_options, 10));
    STATUS_CASE(tq_push_options_set_deadline_unix_ms, tq_push_options_set_deadline_unix_ms(push_options, 10));
    STATUS_CASE(tq_pull_options_set_lease_ms, tq_pull_options_set_lease_ms(pull_options, 10));
    VALUE_CASE(tq_options_new, tq_options_new(), NULL);
    VALUE_CASE(tq_push_options_new, tq_push_options_new(), NULL);
    VALUE_CASE(tq_pull_options_new, tq_pull_options_new(), NULL);
    VALUE_CASE(tq_task_id, tq_task_id(task), 0);
    VALUE_CASE(tq_task_token, tq_task_token(task), 0);
    VALUE_CASE(tq_task_attempts, tq_task_attempts(task), 0u);
    VALUE_CASE(tq_task_priority, tq_task_priority(task), 0);
    VALUE_CASE(tq_task_max_attempts, tq_task_max_attempts(task), 0u);
    VALUE_CASE(tq_task_run_at_unix_ms, tq_task_run_at_unix_ms(task), 0);
    VALUE_CASE(tq_task_expires_at_unix_ms, tq_task_expires_at_unix_ms(task), 0);
    VALUE_CASE(tq_task_deadline_unix_ms, tq_task_deadline_unix_ms(task), 0);
    VALUE_CASE(tq_task_state, tq_task_state(task), -1);
    VALUE_CASE(tq_task_last_error, tq_task_last_error(task), NULL);
    VALUE_CASE(tq_task_result, tq_task_result(task), NULL);
    VALUE_CASE(tq_task_progress, tq_task_progress(task), NULL);
    VALUE_CASE(tq_task_group, tq_task_group(task), NULL);
    VALUE_CASE(tq_task_step_count, tq_task_step_count(task), 0u);
    VALUE_CASE(tq_task_step_name, tq_task_step_name(task, 0), NULL);
    VALUE_CASE(tq_task_step_output, tq_task_step_output(task, 0), NULL);
    VALUE_CASE(tq_task_step_recorded_at_unix_ms, tq_task_step_recorded_at_unix_ms(task, 0), 0);
    VALUE_CASE(tq_task_attempt_count, tq_task_attempt_count(task), 0u);
    VALUE_CASE(tq_task_attempt_number, tq_task_attempt_number(task, 0), 0u);
    VALUE_CASE(tq_task_attempt_outcome, tq_task_attempt_outcome(task, 0), -1);
    VALUE_CASE(tq_task_attempt_reason, tq_task_attempt_reason(task, 0), NULL);
    VALUE_CASE(tq_task_attempt_holder_id, tq_task_attempt_holder_id(task, 0), 0);
    VALUE_CASE(tq_task_attempt_holder_pid, tq_task_attempt_holder_pid(task, 0), 0);
    VALUE_CASE(tq_task_attempt_started_at_unix_ms, tq_task_attempt_started_at_unix_ms(task, 0), 0);
    VALUE_CASE(tq_task_attempt_ended_at_unix_ms, tq_task_attempt_ended_at_unix_ms(task, 0), 0);
    VALUE_CASE(tq_cancel_new, tq_cancel_new(), NULL);
    VALUE_CASE(tq_version_number, tq_version_number(), 0u);
    VALUE_CASE(tq_task_payload, tq_task_payload(task, NULL), NULL);
    VALUE_CASE(tq_version, strcmp(tq_version(), ""), 0);
    VALUE_CASE(tq_status_str, strcmp(tq_status_str(0), "unknown status"), 0);
    /* The void functions: the panic is caught (the object stays allocated). */
    inject("tq_options_free");
    tq_options_free(options);
    verdict("tq_options_free", true);
    inject("tq_push_options_free");
    tq_push_options_free(push_options);
    verdict("tq_push_options_free", true);
    inject("tq_pull_options_free");
    tq_pull_options_free(pull_options);
    verdict("tq_pull_options_free", true);
    inject("tq_cancel_free");
    tq_cancel_free(cancel);
    verdict("tq_cancel_free", true);
    inject("tq_task_free");
    tq_task_free(task);
    verdict("tq_task_free", true);
    inject("tq_close");
    tq_close(queue);
    verdict("tq_close", true);
    /* tq_last_error itself: a panic there returns "". */
    inject("tq_last_error");
    bool empty = strcmp(tq_last_error(), "") == 0;
    verdict("tq_last_error", empty);

    /* Nothing was torn down: the same handle, options and task still work. */
    bool working = tq_push(queue, "3", 1, NULL, NULL) == TQ_OK && tq_finish(queue, task) == TQ_OK &&
                   tq_options_set_durability(options, TQ_DURABILITY_FULL) == TQ_OK &&
                   tq_count(queue, TQ_STATE_PENDING, &n) == TQ_OK && n == 1;
    if (working) {
        passed++;
    } else {
        failed++;
        printf("after the panics: %s\n", tq_last_error());
    }
    tq_task_free(task);
    tq_cancel_free(cancel);
    tq_options_free(options);
    tq_push_options_free(push_options);
    tq_pull_options_free(pull_options);
    tq_close(queue);

    char side[4200];
    unlink(path);
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
