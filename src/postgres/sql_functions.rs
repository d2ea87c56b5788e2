//! tq's SQL functions on PostgreSQL (`push`, `finish`, and what they
//! call), as the migrations of `schema.rs` create and re-create them: for a
//! task pushed, or a delivery finished, in the application's own
//! transaction. Each constant is one migration; `@.` names the schema and
//! the upper-case names are the library's limits, written in when the
//! migration runs (`schema.rs`, `migration_sql`). Never edit a released
//! one: a new migration re-creates a function.

/// 10: push and finish as SQL functions, for a task pushed (or a
/// delivery finished) in the application's own transaction, from any
/// client, a trigger or psql (docs/postgresql.md). They keep the rules
/// of the API's push (`push.rs`, `store.rs`) and finish (`finish.rs`)
/// with its messages; the limits are the library's constants, written
/// in when the migration runs (see `migration_sql`). Errors: SQLSTATE
/// 22023 for a bad argument, 22P02 for a payload that is not JSON,
/// 55000 for a receipt not held, 40001 for a unique key contended.
pub(super) const PUSH_AND_FINISH: &str = "CREATE FUNCTION @.integer_option(options jsonb, name text) RETURNS numeric
    LANGUAGE plpgsql IMMUTABLE AS $$
    DECLARE
        value jsonb := options -> name;
    BEGIN
        IF value IS NULL OR value = 'null' THEN
            RETURN NULL;
        END IF;
        IF jsonb_typeof(value) <> 'number' OR value::text::numeric <> trunc(value::text::numeric) THEN
            RAISE EXCEPTION 'the push option ''%'' must be an integer, got %', name, value
                USING ERRCODE = '22023';
        END IF;
        RETURN value::text::numeric;
    END $$;
    -- Stores a task whose arguments are checked: with unique key
    -- `wanted_key` unless NULL, unless a task holds it (then `stored` is
    -- false and `id` the holder's); waiting for the tasks `named` of its
    -- queue (ascending, each once; NULL: none), or, when `anyway`, for
    -- their ends however they end; in ordered group `grp` (NULL: none),
    -- `at_once` of whose tasks run at once. `delay_ms` counts from now;
    -- NULL: the task is due at `run_at_ms`. The API's pushes with a unique
    -- key, parents or a group call it too (`push.rs`), so both ways keep
    -- one set of rules.
    CREATE FUNCTION @.push_task(queue text, payload text, delay_ms bigint, run_at_ms bigint,
        priority integer, max_attempts bigint, wanted_key text, key_window bigint,
        named int8[], anyway boolean, grp text, at_once integer,
        OUT id bigint, OUT stored boolean)
    LANGUAGE plpgsql AS $$
    #variable_conflict use_column
    DECLARE
        now_ms bigint := floor(extract(epoch FROM statement_timestamp()) * 1000)::int8;
        due bigint := coalesce(now_ms + delay_ms, run_at_ms);
        unfinished int8[] := '{}';
        predecessor bigint;
        parent bigint;
        parent_state smallint;
        holder record;
        waiting bigint;
    BEGIN
        -- The group locked first (with the key push.rs's lock_groups
        -- takes), then the tasks waited for marked, then the group's
        -- predecessor.
        IF grp IS NOT NULL THEN
            PERFORM pg_advisory_xact_lock(hashtextextended(
                'tq:SCHEMA_QUOTED:' || octet_length(push_task.queue) || ':' || push_task.queue || ':' || grp, 0));
        END IF;
        -- One statement marks them all; the first (by id) that cannot be
        -- waited for fails the push.
        IF cardinality(named) > 0 THEN
            WITH marked AS (
                UPDATE @.tasks SET has_children = true
                WHERE id = ANY (named) AND queue = push_task.queue RETURNING id, state)
            SELECT coalesce(array_agg(n.id ORDER BY n.id) FILTER (WHERE m.state NOT IN (2, 3, 5)),
                            '{}'),
                   min(n.id) FILTER (WHERE m.state IS NULL OR (m.state IN (3, 5) AND NOT anyway))
            INTO unfinished, parent
            FROM unnest(named) AS n(id) LEFT JOIN marked m ON m.id = n.id;
            IF parent IS NOT NULL THEN
                SELECT state INTO parent_state FROM @.tasks
                WHERE id = parent AND queue = push_task.queue;
                IF NOT FOUND THEN
                    RAISE EXCEPTION 'queue ''%'' has no task % to wait for: a task can wait only '
                        'for tasks of its own queue that are not finished, or finished and kept '
                        'as history', push_task.queue, parent USING ERRCODE = '22023';
                END IF;
                RAISE EXCEPTION 'task % is %: a task waiting for it would be cancelled at once '
                    '(push it to run anyway, or retry task % first)', parent,
                    CASE WHEN parent_state = 3 THEN 'dead' ELSE 'cancelled' END, parent
                    USING ERRCODE = '22023';
            END IF;
        END IF;
        IF grp IS NOT NULL THEN
            SELECT id INTO predecessor FROM @.tasks
            WHERE queue = push_task.queue AND group_key = grp AND state IN (0, 1, 4, 6, 7)
            ORDER BY id DESC LIMIT 1 OFFSET at_once - 1;
            IF predecessor = ANY (unfinished) THEN
                predecessor := NULL;
            ELSIF predecessor IS NOT NULL THEN
                UPDATE @.tasks SET has_children = true WHERE id = predecessor
                RETURNING state INTO parent_state;
                IF parent_state IN (2, 3, 5) THEN
                    predecessor := NULL;
                END IF;
            END IF;
        END IF;
        waiting := cardinality(unfinished) + CASE WHEN predecessor IS NULL THEN 0 ELSE 1 END;

        -- Two rounds at most: a concurrent push that took the key first is
        -- seen by the second look.
        FOR round IN 1 .. 2 LOOP
            IF wanted_key IS NOT NULL THEN
                SELECT id, state, unique_until INTO holder FROM @.tasks
                WHERE queue = push_task.queue AND unique_key = wanted_key FOR UPDATE;
                IF FOUND THEN
                    -- As store.rs's holds_unique_key: pending, blocked or
                    -- leased, or done within its window.
                    IF holder.state IN (0, 1, 4, 6, 7)
                       OR (holder.state = 2 AND holder.unique_until > now_ms) THEN
                        id := holder.id;
                        stored := false;
                        RETURN;
                    END IF;
                    UPDATE @.tasks SET unique_key = NULL WHERE id = holder.id;
                END IF;
            END IF;
            INSERT INTO @.tasks (queue, state, payload, created_at, run_at, priority, max_attempts,
                                 unique_key, unique_for, parents, waiting_for, group_key)
            VALUES (push_task.queue,
                    CASE WHEN waiting > 0 THEN 7 WHEN due <= now_ms THEN 0 ELSE 4 END,
                    push_task.payload, now_ms, due, push_task.priority, push_task.max_attempts, wanted_key, key_window,
                    CASE WHEN cardinality(named) > 0 THEN named END, waiting, grp)
            ON CONFLICT (queue, unique_key) WHERE unique_key IS NOT NULL DO NOTHING
            RETURNING id INTO push_task.id;
            IF push_task.id IS NOT NULL THEN
                IF cardinality(unfinished) > 0 THEN
                    INSERT INTO @.dependencies (parent, task, run_anyway)
                    SELECT unnest(unfinished), push_task.id, anyway;
                END IF;
                IF predecessor IS NOT NULL THEN
                    INSERT INTO @.dependencies (parent, task, run_anyway)
                    VALUES (predecessor, push_task.id, true);
                END IF;
                -- Wakes the waiting pulls of every process at the commit.
                PERFORM pg_notify('CHANNEL_NAME', push_task.queue);
                stored := true;
                RETURN;
            END IF;
        END LOOP;
        RAISE EXCEPTION 'the unique key was taken and given up by other pushes meanwhile: try again'
            USING ERRCODE = '40001';
    END $$;
    CREATE FUNCTION @.push(queue text, payload text, options jsonb DEFAULT '{}') RETURNS bigint
    LANGUAGE plpgsql AS $$
    DECLARE
        opts jsonb := coalesce(push.options, '{}');
        why text;
        unknown text;
        given_delay numeric;
        given_at numeric;
        prio numeric;
        tries numeric;
        wanted_key text;
        key_window numeric;
        grp text;
        at_once numeric;
        anyway boolean;
        named int8[];
        bad jsonb;
        pushed record;
    BEGIN
        IF push.queue IS NULL OR push.payload IS NULL THEN
            RAISE EXCEPTION 'tq''s push needs a queue name and a payload, got NULL'
                USING ERRCODE = '22023';
        END IF;
        IF octet_length(push.queue) NOT BETWEEN 1 AND MAX_QUEUE_NAME_LEN THEN
            RAISE EXCEPTION 'a queue name must be 1 to % bytes long, got % bytes',
                MAX_QUEUE_NAME_LEN, octet_length(push.queue) USING ERRCODE = '22023';
        END IF;
        IF octet_length(push.payload) > MAX_PAYLOAD_LEN THEN
            RAISE EXCEPTION 'the payload is % bytes; this queue''s limit is %',
                octet_length(push.payload), MAX_PAYLOAD_LEN USING ERRCODE = '22023';
        END IF;
        BEGIN
            PERFORM push.payload::json;
        EXCEPTION WHEN invalid_text_representation THEN
            GET STACKED DIAGNOSTICS why = PG_EXCEPTION_DETAIL;
            RAISE EXCEPTION 'the payload is not JSON: %: %', SQLERRM, why USING ERRCODE = '22P02';
        END;
        IF jsonb_typeof(opts) <> 'object' THEN
            RAISE EXCEPTION 'tq''s push options must be a JSON object, got %', opts
                USING ERRCODE = '22023';
        END IF;
        SELECT string_agg(format('''%s''', k), ', ') INTO unknown FROM jsonb_object_keys(opts) k
        WHERE k <> ALL (ARRAY['delay_ms', 'run_at_unix_ms', 'priority', 'max_attempts',
                              'unique_key', 'unique_for_ms', 'after', 'on_parent_failure',
                              'group', 'group_max_at_once']);
        IF unknown IS NOT NULL THEN
            RAISE EXCEPTION 'unknown push option %: the options are delay_ms, run_at_unix_ms, '
                'priority, max_attempts, unique_key, unique_for_ms, after, on_parent_failure, '
                'group, group_max_at_once', unknown USING ERRCODE = '22023';
        END IF;

        given_delay := @.integer_option(opts, 'delay_ms');
        given_at := @.integer_option(opts, 'run_at_unix_ms');
        IF given_delay IS NOT NULL AND given_at IS NOT NULL THEN
            RAISE EXCEPTION 'a push takes a delay or a run-at time, not both'
                USING ERRCODE = '22023';
        END IF;
        IF given_delay NOT BETWEEN 0 AND MAX_DURATION_MS THEN
            RAISE EXCEPTION 'delay must be between 0 ms and % ms, got % ms', MAX_DURATION_MS, given_delay
                USING ERRCODE = '22023';
        END IF;
        IF given_at NOT BETWEEN 0 AND 9223372036854775807 THEN
            RAISE EXCEPTION 'run-at time must not be before 1970, got % ms', given_at
                USING ERRCODE = '22023';
        END IF;
        prio := coalesce(@.integer_option(opts, 'priority'), 0);
        IF prio NOT BETWEEN -2147483648 AND 2147483647 THEN
            RAISE EXCEPTION 'a priority is a 32-bit integer, got %', prio USING ERRCODE = '22023';
        END IF;
        tries := coalesce(@.integer_option(opts, 'max_attempts'), DEFAULT_MAX_ATTEMPTS);
        IF tries NOT BETWEEN 1 AND 4294967295 THEN
            RAISE EXCEPTION 'max attempts must be at least 1 (the first delivery is an attempt)'
                USING ERRCODE = '22023';
        END IF;

        IF opts ? 'unique_key' THEN
            IF jsonb_typeof(opts -> 'unique_key') <> 'string' THEN
                RAISE EXCEPTION 'the push option ''unique_key'' must be a string, got %',
                    opts -> 'unique_key' USING ERRCODE = '22023';
            END IF;
            wanted_key := opts ->> 'unique_key';
            IF octet_length(wanted_key) NOT BETWEEN 1 AND MAX_UNIQUE_KEY_LEN THEN
                RAISE EXCEPTION 'a unique key must be 1 to % bytes long, got % bytes',
                    MAX_UNIQUE_KEY_LEN, octet_length(wanted_key) USING ERRCODE = '22023';
            END IF;
        END IF;
        key_window := coalesce(@.integer_option(opts, 'unique_for_ms'), 0);
        IF key_window NOT BETWEEN 0 AND MAX_DURATION_MS THEN
            RAISE EXCEPTION 'the unique window must be between 0 ms and % ms, got % ms',
                MAX_DURATION_MS, key_window USING ERRCODE = '22023';
        END IF;
        IF wanted_key IS NULL AND opts ? 'unique_for_ms' THEN
            RAISE EXCEPTION 'a unique window needs a unique key: set the key first'
                USING ERRCODE = '22023';
        END IF;

        IF opts ? 'group' THEN
            IF jsonb_typeof(opts -> 'group') <> 'string' THEN
                RAISE EXCEPTION 'the push option ''group'' must be a string, got %',
                    opts -> 'group' USING ERRCODE = '22023';
            END IF;
            grp := opts ->> 'group';
            IF octet_length(grp) NOT BETWEEN 1 AND MAX_UNIQUE_KEY_LEN THEN
                RAISE EXCEPTION 'a group key must be 1 to % bytes long, got % bytes',
                    MAX_UNIQUE_KEY_LEN, octet_length(grp) USING ERRCODE = '22023';
            END IF;
        ELSIF opts ? 'group_max_at_once' THEN
            RAISE EXCEPTION 'group_max_at_once needs a group: set group too' USING ERRCODE = '22023';
        END IF;
        at_once := coalesce(@.integer_option(opts, 'group_max_at_once'), 1);
        IF at_once NOT BETWEEN 1 AND MAX_GROUP_AT_ONCE THEN
            RAISE EXCEPTION 'a group delivers 1 to % of its tasks at once, got %',
                MAX_GROUP_AT_ONCE, at_once USING ERRCODE = '22023';
        END IF;

        IF opts ? 'on_parent_failure'
           AND (jsonb_typeof(opts -> 'on_parent_failure') <> 'string'
                OR opts ->> 'on_parent_failure' NOT IN ('cancel', 'run_anyway')) THEN
            RAISE EXCEPTION 'on_parent_failure is ''cancel'' or ''run_anyway'', got %',
                opts -> 'on_parent_failure' USING ERRCODE = '22023';
        END IF;
        anyway := coalesce(opts ->> 'on_parent_failure', 'cancel') = 'run_anyway';
        IF opts ? 'after' THEN
            IF jsonb_typeof(opts -> 'after') <> 'array' THEN
                RAISE EXCEPTION 'the push option ''after'' must be an array of task ids, got %',
                    opts -> 'after' USING ERRCODE = '22023';
            END IF;
            SELECT x INTO bad FROM jsonb_array_elements(opts -> 'after') x
            WHERE jsonb_typeof(x) <> 'number' OR x::text::numeric <> trunc(x::text::numeric)
               OR x::text::numeric NOT BETWEEN 1 AND 9223372036854775807
            LIMIT 1;
            IF FOUND THEN
                RAISE EXCEPTION 'a task to wait for is named by its id, which is positive, got %',
                    bad USING ERRCODE = '22023';
            END IF;
            SELECT array_agg(DISTINCT x::int8 ORDER BY x::int8) INTO named
            FROM jsonb_array_elements_text(opts -> 'after') x;
            IF cardinality(named) > MAX_PARENTS THEN
                RAISE EXCEPTION 'a task may wait for at most % tasks, got %',
                    MAX_PARENTS, cardinality(named) USING ERRCODE = '22023';
            END IF;
        END IF;

            SELECT * INTO pushed FROM @.push_task(push.queue, push.payload,
            CASE WHEN given_at IS NULL THEN coalesce(given_delay, 0) END::int8, given_at::int8,
            prio::int4, tries::int8, wanted_key, key_window::int8, named, anyway, grp,
            at_once::int4);
        -- A key held answers the holder's id, as tq_push does (with TQ_DUPLICATE).
        RETURN pushed.id;
    END $$;
    CREATE FUNCTION @.finish(id bigint, token bigint, keep_history boolean DEFAULT false)
    RETURNS void LANGUAGE plpgsql AS $$
    #variable_conflict use_column
    DECLARE
        now_ms bigint := floor(extract(epoch FROM statement_timestamp()) * 1000)::int8;
        finished_queue text;
        waited_for boolean;
    BEGIN
        -- As finish.rs's FINISH: deleted, or kept as done with history or
        -- for a unique window.
        IF NOT coalesce(finish.keep_history, false) THEN
            DELETE FROM @.tasks
            WHERE id = finish.id AND state = 1 AND lease_token = finish.token
              AND (unique_key IS NULL OR unique_for = 0)
            RETURNING queue, has_children INTO finished_queue, waited_for;
        END IF;
        IF finished_queue IS NULL THEN
            UPDATE @.tasks t
            SET state = 2, finished_at = now_ms,
                lease_token = NULL, lease_expires_at = NULL, holder_id = NULL,
                unique_key = CASE WHEN t.unique_for > 0 THEN t.unique_key END,
                unique_until = CASE WHEN t.unique_for > 0 AND t.unique_key IS NOT NULL
                                    THEN now_ms + t.unique_for END
            WHERE id = finish.id AND state = 1 AND lease_token = finish.token
            RETURNING queue, has_children INTO finished_queue, waited_for;
        END IF;
        IF finished_queue IS NULL THEN
            RAISE EXCEPTION 'task % is not held by this delivery: it was already finished or '
                'failed, or its lease was recovered or taken by another worker', finish.id
                USING ERRCODE = '55000';
        END IF;
        IF NOT coalesce(finish.keep_history, false) THEN
            DELETE FROM @.tasks WHERE id IN (
                SELECT id FROM @.tasks
                WHERE queue = finished_queue AND state = 2 AND unique_until IS NOT NULL
                  AND unique_until <= now_ms AND (result_until IS NULL OR result_until <= now_ms)
                LIMIT 100 FOR UPDATE SKIP LOCKED);
        END IF;
        -- The tasks waiting for it may be ready now: the trigger that
        -- released them notifies only a session of tq's (`tq.channel`).
        -- A slot of a concurrency limit freed wakes a pull that waits for one.
        IF waited_for THEN
            PERFORM pg_notify('CHANNEL_NAME', finished_queue);
        ELSE
            PERFORM pg_notify('CHANNEL_NAME', finished_queue) FROM @.queues
            WHERE queue = finished_queue AND slots_wanted_until > now_ms;
        END IF;
    END $$;";

/// 11: SQLite's version 12: expiries and deadlines, and `not_after`,
/// the one a claim checks, indexed for the pending tasks that have one.
pub(super) const EXPIRIES_AND_DEADLINES: &str = "ALTER TABLE @.tasks ADD COLUMN expires_at bigint;
    ALTER TABLE @.tasks ADD COLUMN deadline bigint;
    ALTER TABLE @.tasks ADD COLUMN not_after bigint;
    CREATE INDEX tasks_not_after ON @.tasks (queue, not_after)
        WHERE not_after IS NOT NULL AND (state = 0 OR state = 4);
    -- The SQL function push of version 10, taking them too (the keys of
    -- PushOptions::from_json): the task stored is then given its limits,
    -- a holder of its unique key found keeps its own.
    CREATE OR REPLACE FUNCTION @.push(queue text, payload text, options jsonb DEFAULT '{}') RETURNS bigint
    LANGUAGE plpgsql AS $$
    DECLARE
        opts jsonb := coalesce(push.options, '{}');
        why text;
        unknown text;
        given_delay numeric;
        given_at numeric;
        prio numeric;
        tries numeric;
        wanted_key text;
        key_window numeric;
        grp text;
        at_once numeric;
        anyway boolean;
        named int8[];
        bad jsonb;
        pushed record;
        now_ms bigint := floor(extract(epoch FROM statement_timestamp()) * 1000)::int8;
        given_limits numeric[];
        expires bigint;
        deadline_ms bigint;
        due bigint;
    BEGIN
        IF push.queue IS NULL OR push.payload IS NULL THEN
            RAISE EXCEPTION 'tq''s push needs a queue name and a payload, got NULL'
                USING ERRCODE = '22023';
        END IF;
        IF octet_length(push.queue) NOT BETWEEN 1 AND MAX_QUEUE_NAME_LEN THEN
            RAISE EXCEPTION 'a queue name must be 1 to % bytes long, got % bytes',
                MAX_QUEUE_NAME_LEN, octet_length(push.queue) USING ERRCODE = '22023';
        END IF;
        IF octet_length(push.payload) > MAX_PAYLOAD_LEN THEN
            RAISE EXCEPTION 'the payload is % bytes; this queue''s limit is %',
                octet_length(push.payload), MAX_PAYLOAD_LEN USING ERRCODE = '22023';
        END IF;
        BEGIN
            PERFORM push.payload::json;
        EXCEPTION WHEN invalid_text_representation THEN
            GET STACKED DIAGNOSTICS why = PG_EXCEPTION_DETAIL;
            RAISE EXCEPTION 'the payload is not JSON: %: %', SQLERRM, why USING ERRCODE = '22P02';
        END;
        IF jsonb_typeof(opts) <> 'object' THEN
            RAISE EXCEPTION 'tq''s push options must be a JSON object, got %', opts
                USING ERRCODE = '22023';
        END IF;
        SELECT string_agg(format('''%s''', k), ', ') INTO unknown FROM jsonb_object_keys(opts) k
        WHERE k <> ALL (ARRAY['delay_ms', 'run_at_unix_ms', 'priority', 'max_attempts',
                              'unique_key', 'unique_for_ms', 'after', 'on_parent_failure',
                              'group', 'group_max_at_once', 'expire_after_ms',
                              'expire_at_unix_ms', 'deadline_after_ms', 'deadline_unix_ms']);
        IF unknown IS NOT NULL THEN
            RAISE EXCEPTION 'unknown push option %: the options are delay_ms, run_at_unix_ms, '
                'priority, max_attempts, unique_key, unique_for_ms, after, on_parent_failure, '
                'group, group_max_at_once, expire_after_ms, expire_at_unix_ms, deadline_after_ms, '
                'deadline_unix_ms', unknown USING ERRCODE = '22023';
        END IF;

        given_delay := @.integer_option(opts, 'delay_ms');
        given_at := @.integer_option(opts, 'run_at_unix_ms');
        IF given_delay IS NOT NULL AND given_at IS NOT NULL THEN
            RAISE EXCEPTION 'a push takes a delay or a run-at time, not both'
                USING ERRCODE = '22023';
        END IF;
        IF given_delay NOT BETWEEN 0 AND MAX_DURATION_MS THEN
            RAISE EXCEPTION 'delay must be between 0 ms and % ms, got % ms', MAX_DURATION_MS, given_delay
                USING ERRCODE = '22023';
        END IF;
        IF given_at NOT BETWEEN 0 AND 9223372036854775807 THEN
            RAISE EXCEPTION 'run-at time must not be before 1970, got % ms', given_at
                USING ERRCODE = '22023';
        END IF;
        -- As PushOptions::from_json and store.rs's check_limits.
        IF opts ? 'expire_after_ms' AND opts ? 'expire_at_unix_ms' THEN
            RAISE EXCEPTION 'a push takes an expiry after the push (expire_after_ms) or at a '
                'time (expire_at_unix_ms), not both' USING ERRCODE = '22023';
        END IF;
        IF opts ? 'deadline_after_ms' AND opts ? 'deadline_unix_ms' THEN
            RAISE EXCEPTION 'a push takes a deadline after the push (deadline_after_ms) or at a '
                'time (deadline_unix_ms), not both' USING ERRCODE = '22023';
        END IF;
        SELECT array_agg(@.integer_option(opts, k) ORDER BY o) INTO given_limits
        FROM unnest(ARRAY['expire_after_ms', 'expire_at_unix_ms', 'deadline_after_ms',
                          'deadline_unix_ms']) WITH ORDINALITY AS u(k, o);
        IF given_limits[1] NOT BETWEEN 1 AND MAX_DURATION_MS THEN
            RAISE EXCEPTION 'the expiry must be between 1 ms and % ms, got % ms',
                MAX_DURATION_MS, given_limits[1] USING ERRCODE = '22023';
        END IF;
        IF given_limits[3] NOT BETWEEN 1 AND MAX_DURATION_MS THEN
            RAISE EXCEPTION 'the deadline must be between 1 ms and % ms, got % ms',
                MAX_DURATION_MS, given_limits[3] USING ERRCODE = '22023';
        END IF;
        IF given_limits[2] NOT BETWEEN 0 AND 9223372036854775807
           OR given_limits[4] NOT BETWEEN 0 AND 9223372036854775807 THEN
            RAISE EXCEPTION 'an expiry or deadline time must not be before 1970, got % ms',
                coalesce(given_limits[2], given_limits[4]) USING ERRCODE = '22023';
        END IF;
        expires := coalesce(now_ms + given_limits[1], given_limits[2]);
        deadline_ms := coalesce(now_ms + given_limits[3], given_limits[4]);
        due := coalesce(now_ms + given_delay, given_at, now_ms);
        IF due > now_ms AND least(expires, deadline_ms) <= due THEN
            RAISE EXCEPTION 'the task''s % (% ms since the Unix epoch) is not after its run '
                'time (% ms): it could never run',
                CASE WHEN expires <= due THEN 'expiry' ELSE 'deadline' END,
                CASE WHEN expires <= due THEN expires ELSE deadline_ms END, due
                USING ERRCODE = '22023';
        END IF;
        prio := coalesce(@.integer_option(opts, 'priority'), 0);
        IF prio NOT BETWEEN -2147483648 AND 2147483647 THEN
            RAISE EXCEPTION 'a priority is a 32-bit integer, got %', prio USING ERRCODE = '22023';
        END IF;
        tries := coalesce(@.integer_option(opts, 'max_attempts'), DEFAULT_MAX_ATTEMPTS);
        IF tries NOT BETWEEN 1 AND 4294967295 THEN
            RAISE EXCEPTION 'max attempts must be at least 1 (the first delivery is an attempt)'
                USING ERRCODE = '22023';
        END IF;

        IF opts ? 'unique_key' THEN
            IF jsonb_typeof(opts -> 'unique_key') <> 'string' THEN
                RAISE EXCEPTION 'the push option ''unique_key'' must be a string, got %',
                    opts -> 'unique_key' USING ERRCODE = '22023';
            END IF;
            wanted_key := opts ->> 'unique_key';
            IF octet_length(wanted_key) NOT BETWEEN 1 AND MAX_UNIQUE_KEY_LEN THEN
                RAISE EXCEPTION 'a unique key must be 1 to % bytes long, got % bytes',
                    MAX_UNIQUE_KEY_LEN, octet_length(wanted_key) USING ERRCODE = '22023';
            END IF;
        END IF;
        key_window := coalesce(@.integer_option(opts, 'unique_for_ms'), 0);
        IF key_window NOT BETWEEN 0 AND MAX_DURATION_MS THEN
            RAISE EXCEPTION 'the unique window must be between 0 ms and % ms, got % ms',
                MAX_DURATION_MS, key_window USING ERRCODE = '22023';
        END IF;
        IF wanted_key IS NULL AND opts ? 'unique_for_ms' THEN
            RAISE EXCEPTION 'a unique window needs a unique key: set the key first'
                USING ERRCODE = '22023';
        END IF;

        IF opts ? 'group' THEN
            IF jsonb_typeof(opts -> 'group') <> 'string' THEN
                RAISE EXCEPTION 'the push option ''group'' must be a string, got %',
                    opts -> 'group' USING ERRCODE = '22023';
            END IF;
            grp := opts ->> 'group';
            IF octet_length(grp) NOT BETWEEN 1 AND MAX_UNIQUE_KEY_LEN THEN
                RAISE EXCEPTION 'a group key must be 1 to % bytes long, got % bytes',
                    MAX_UNIQUE_KEY_LEN, octet_length(grp) USING ERRCODE = '22023';
            END IF;
        ELSIF opts ? 'group_max_at_once' THEN
            RAISE EXCEPTION 'group_max_at_once needs a group: set group too' USING ERRCODE = '22023';
        END IF;
        at_once := coalesce(@.integer_option(opts, 'group_max_at_once'), 1);
        IF at_once NOT BETWEEN 1 AND MAX_GROUP_AT_ONCE THEN
            RAISE EXCEPTION 'a group delivers 1 to % of its tasks at once, got %',
                MAX_GROUP_AT_ONCE, at_once USING ERRCODE = '22023';
        END IF;

        IF opts ? 'on_parent_failure'
           AND (jsonb_typeof(opts -> 'on_parent_failure') <> 'string'
                OR opts ->> 'on_parent_failure' NOT IN ('cancel', 'run_anyway')) THEN
            RAISE EXCEPTION 'on_parent_failure is ''cancel'' or ''run_anyway'', got %',
                opts -> 'on_parent_failure' USING ERRCODE = '22023';
        END IF;
        anyway := coalesce(opts ->> 'on_parent_failure', 'cancel') = 'run_anyway';
        IF opts ? 'after' THEN
            IF jsonb_typeof(opts -> 'after') <> 'array' THEN
                RAISE EXCEPTION 'the push option ''after'' must be an array of task ids, got %',
                    opts -> 'after' USING ERRCODE = '22023';
            END IF;
            SELECT x INTO bad FROM jsonb_array_elements(opts -> 'after') x
            WHERE jsonb_typeof(x) <> 'number' OR x::text::numeric <> trunc(x::text::numeric)
               OR x::text::numeric NOT BETWEEN 1 AND 9223372036854775807
            LIMIT 1;
            IF FOUND THEN
                RAISE EXCEPTION 'a task to wait for is named by its id, which is positive, got %',
                    bad USING ERRCODE = '22023';
            END IF;
            SELECT array_agg(DISTINCT x::int8 ORDER BY x::int8) INTO named
            FROM jsonb_array_elements_text(opts -> 'after') x;
            IF cardinality(named) > MAX_PARENTS THEN
                RAISE EXCEPTION 'a task may wait for at most % tasks, got %',
                    MAX_PARENTS, cardinality(named) USING ERRCODE = '22023';
            END IF;
        END IF;

            SELECT * INTO pushed FROM @.push_task(push.queue, push.payload,
            CASE WHEN given_at IS NULL THEN coalesce(given_delay, 0) END::int8, given_at::int8,
            prio::int4, tries::int8, wanted_key, key_window::int8, named, anyway, grp,
            at_once::int4);
        IF pushed.stored AND (expires IS NOT NULL OR deadline_ms IS NOT NULL) THEN
            UPDATE @.tasks SET expires_at = expires, deadline = deadline_ms,
                               not_after = least(expires, deadline_ms)
            WHERE id = pushed.id;
        END IF;
        -- A key held answers the holder's id, as tq_push does (with TQ_DUPLICATE).
        RETURN pushed.id;
    END $$;";

/// 12: SQLite's version 13: a cap on each queue's pending tasks (ready,
/// waiting, blocked; NULL: none), named for the queue so that a cap per
/// fairness key can sit beside it. Every push calls `check_room` in its
/// statement: for a capped queue it locks the queue's row of settings
/// until the push commits, so that the pushes to it count one after
/// another (each count, a statement of its own, sees the pushes
/// committed before it took the lock), and refuses with SQLSTATE 53400
/// a push that would take the count over the cap; `pushed` of the tasks
/// counted are the push's own, already stored. push_task is migration
/// 10's with the check once it stored its task, so that the API's pushes
/// and the SQL function `push` both check, and a push finding its unique
/// key held stores nothing and is not refused.
pub(super) const CAP_ON_PENDING: &str = "ALTER TABLE @.queues ADD COLUMN max_pending bigint;
    CREATE FUNCTION @.check_room(q text, adding bigint, pushed bigint) RETURNS void
    LANGUAGE plpgsql AS $$
    DECLARE
        cap bigint;
        pending bigint;
    BEGIN
        SELECT max_pending INTO cap FROM @.queues
        WHERE queue = q AND max_pending > 0 FOR UPDATE;
        IF cap IS NULL OR adding = 0 THEN
            RETURN;
        END IF;
        SELECT count(*) INTO pending FROM (
            SELECT 1 FROM @.tasks WHERE queue = q AND (state = 0 OR state = 4 OR state = 7)
            LIMIT cap + 1) AS capped;
        IF pending - pushed + adding <= cap THEN
            RETURN;
        END IF;
        SELECT count(*) - pushed INTO pending FROM @.tasks
        WHERE queue = q AND (state = 0 OR state = 4 OR state = 7);
        RAISE EXCEPTION 'queue ''%'' is full: it holds % pending tasks and its cap is %, so the % '
            'this push would add do not fit (nothing was pushed)', q, pending, cap, adding
            USING ERRCODE = '53400';
    END $$;
    CREATE OR REPLACE FUNCTION @.push_task(queue text, payload text, delay_ms bigint, run_at_ms bigint,
        priority integer, max_attempts bigint, wanted_key text, key_window bigint,
        named int8[], anyway boolean, grp text, at_once integer,
        OUT id bigint, OUT stored boolean)
    LANGUAGE plpgsql AS $$
    #variable_conflict use_column
    DECLARE
        now_ms bigint := floor(extract(epoch FROM statement_timestamp()) * 1000)::int8;
        due bigint := coalesce(now_ms + delay_ms, run_at_ms);
        unfinished int8[] := '{}';
        predecessor bigint;
        parent bigint;
        parent_state smallint;
        holder record;
        waiting bigint;
    BEGIN
        -- The group locked first (with the key push.rs's lock_groups
        -- takes), then the tasks waited for marked, then the group's
        -- predecessor.
        IF grp IS NOT NULL THEN
            PERFORM pg_advisory_xact_lock(hashtextextended(
                'tq:SCHEMA_QUOTED:' || octet_length(push_task.queue) || ':' || push_task.queue || ':' || grp, 0));
        END IF;
        -- One statement marks them all; the first (by id) that cannot be
        -- waited for fails the push.
        IF cardinality(named) > 0 THEN
            WITH marked AS (
                UPDATE @.tasks SET has_children = true
                WHERE id = ANY (named) AND queue = push_task.queue RETURNING id, state)
            SELECT coalesce(array_agg(n.id ORDER BY n.id) FILTER (WHERE m.state NOT IN (2, 3, 5)),
                            '{}'),
                   min(n.id) FILTER (WHERE m.state IS NULL OR (m.state IN (3, 5) AND NOT anyway))
            INTO unfinished, parent
            FROM unnest(named) AS n(id) LEFT JOIN marked m ON m.id = n.id;
            IF parent IS NOT NULL THEN
                SELECT state INTO parent_state FROM @.tasks
                WHERE id = parent AND queue = push_task.queue;
                IF NOT FOUND THEN
                    RAISE EXCEPTION 'queue ''%'' has no task % to wait for: a task can wait only '
                        'for tasks of its own queue that are not finished, or finished and kept '
                        'as history', push_task.queue, parent USING ERRCODE = '22023';
                END IF;
                RAISE EXCEPTION 'task % is %: a task waiting for it would be cancelled at once '
                    '(push it to run anyway, or retry task % first)', parent,
                    CASE WHEN parent_state = 3 THEN 'dead' ELSE 'cancelled' END, parent
                    USING ERRCODE = '22023';
            END IF;
        END IF;
        IF grp IS NOT NULL THEN
            SELECT id INTO predecessor FROM @.tasks
            WHERE queue = push_task.queue AND group_key = grp AND state IN (0, 1, 4, 6, 7)
            ORDER BY id DESC LIMIT 1 OFFSET at_once - 1;
            IF predecessor = ANY (unfinished) THEN
                predecessor := NULL;
            ELSIF predecessor IS NOT NULL THEN
                UPDATE @.tasks SET has_children = true WHERE id = predecessor
                RETURNING state INTO parent_state;
                IF parent_state IN (2, 3, 5) THEN
                    predecessor := NULL;
                END IF;
            END IF;
        END IF;
        waiting := cardinality(unfinished) + CASE WHEN predecessor IS NULL THEN 0 ELSE 1 END;

        -- Two rounds at most: a concurrent push that took the key first is
        -- seen by the second look.
        FOR round IN 1 .. 2 LOOP
            IF wanted_key IS NOT NULL THEN
                SELECT id, state, unique_until INTO holder FROM @.tasks
                WHERE queue = push_task.queue AND unique_key = wanted_key FOR UPDATE;
                IF FOUND THEN
                    -- As store.rs's holds_unique_key: pending, blocked or
                    -- leased, or done within its window.
                    IF holder.state IN (0, 1, 4, 6, 7)
                       OR (holder.state = 2 AND holder.unique_until > now_ms) THEN
                        id := holder.id;
                        stored := false;
                        RETURN;
                    END IF;
                    UPDATE @.tasks SET unique_key = NULL WHERE id = holder.id;
                END IF;
            END IF;
            INSERT INTO @.tasks (queue, state, payload, created_at, run_at, priority, max_attempts,
                                 unique_key, unique_for, parents, waiting_for, group_key)
            VALUES (push_task.queue,
                    CASE WHEN waiting > 0 THEN 7 WHEN due <= now_ms THEN 0 ELSE 4 END,
                    push_task.payload, now_ms, due, push_task.priority, push_task.max_attempts, wanted_key, key_window,
                    CASE WHEN cardinality(named) > 0 THEN named END, waiting, grp)
            ON CONFLICT (queue, unique_key) WHERE unique_key IS NOT NULL DO NOTHING
            RETURNING id INTO push_task.id;
            IF push_task.id IS NOT NULL THEN
                IF cardinality(unfinished) > 0 THEN
                    INSERT INTO @.dependencies (parent, task, run_anyway)
                    SELECT unnest(unfinished), push_task.id, anyway;
                END IF;
                IF predecessor IS NOT NULL THEN
                    INSERT INTO @.dependencies (parent, task, run_anyway)
                    VALUES (predecessor, push_task.id, true);
                END IF;
                PERFORM @.check_room(push_task.queue, 1, 1);
                -- Wakes the waiting pulls of every process at the commit.
                PERFORM pg_notify('CHANNEL_NAME', push_task.queue);
                stored := true;
                RETURN;
            END IF;
        END LOOP;
        RAISE EXCEPTION 'the unique key was taken and given up by other pushes meanwhile: try again'
            USING ERRCODE = '40001';
    END $$;";

/// 13: debounce and replace on a unique key (SQLite needs no new version:
/// a task's `created_at` is the time it was first pushed, from which the
/// longest debounce counts). `merge_pending` merges a push into task
/// `task`, the pending holder of its unique key: store.rs's `merge_sql`
/// (a test checks that it is the same text), answering the task's id, or
/// NULL when the task is not pending or is held by a delivery; when it
/// merged, it wakes the waiting pulls of every process at the commit.
/// PL/pgSQL rather than SQL, so that a session plans the update once. The
/// API's pushes call it once push_task found the key held, and so does
/// the SQL function push, which takes `replace_pending` and
/// `debounce_max_ms` too (the keys of PushOptions::from_json) and is 11's
/// otherwise.
pub(super) const MERGE_PENDING: &str = "CREATE FUNCTION @.merge_pending(task bigint, new_payload text,
        delay_ms bigint, run_at_ms bigint, debounce_max_ms bigint) RETURNS bigint
    LANGUAGE plpgsql AS $$
    DECLARE
        merged bigint;
        queue_name text;
    BEGIN
        UPDATE @.tasks SET payload = coalesce($2::text, payload), run_at = CASE WHEN $5::int8 IS NULL
            THEN run_at WHEN coalesce(NOW_MS + $3::int8, $4::int8) < created_at + $5::int8 THEN
            coalesce(NOW_MS + $3::int8, $4::int8) ELSE created_at + $5::int8 END, state = CASE WHEN
            state = 7 THEN 7 WHEN CASE WHEN $5::int8 IS NULL THEN run_at WHEN coalesce(NOW_MS +
            $3::int8, $4::int8) < created_at + $5::int8 THEN coalesce(NOW_MS + $3::int8, $4::int8)
            ELSE created_at + $5::int8 END <= NOW_MS THEN 0 ELSE 4 END WHERE id = $1 AND state IN (0,
            4, 7) RETURNING id
        INTO merged;
        IF merged IS NOT NULL THEN
            SELECT queue INTO queue_name FROM @.tasks WHERE id = merged;
            PERFORM pg_notify('CHANNEL_NAME', queue_name);
        END IF;
        RETURN merged;
    END $$;
    CREATE OR REPLACE FUNCTION @.push(queue text, payload text, options jsonb DEFAULT '{}') RETURNS bigint
    LANGUAGE plpgsql AS $$
    DECLARE
        opts jsonb := coalesce(push.options, '{}');
        why text;
        unknown text;
        given_delay numeric;
        given_at numeric;
        prio numeric;
        tries numeric;
        wanted_key text;
        key_window numeric;
        grp text;
        at_once numeric;
        anyway boolean;
        named int8[];
        bad jsonb;
        pushed record;
        now_ms bigint := floor(extract(epoch FROM statement_timestamp()) * 1000)::int8;
        given_limits numeric[];
        expires bigint;
        deadline_ms bigint;
        due bigint;
        replacing boolean;
        debounce_max numeric;
        conflict text;
    BEGIN
        IF push.queue IS NULL OR push.payload IS NULL THEN
            RAISE EXCEPTION 'tq''s push needs a queue name and a payload, got NULL'
                USING ERRCODE = '22023';
        END IF;
        IF octet_length(push.queue) NOT BETWEEN 1 AND MAX_QUEUE_NAME_LEN THEN
            RAISE EXCEPTION 'a queue name must be 1 to % bytes long, got % bytes',
                MAX_QUEUE_NAME_LEN, octet_length(push.queue) USING ERRCODE = '22023';
        END IF;
        IF octet_length(push.payload) > MAX_PAYLOAD_LEN THEN
            RAISE EXCEPTION 'the payload is % bytes; this queue''s limit is %',
                octet_length(push.payload), MAX_PAYLOAD_LEN USING ERRCODE = '22023';
        END IF;
        BEGIN
            PERFORM push.payload::json;
        EXCEPTION WHEN invalid_text_representation THEN
            GET STACKED DIAGNOSTICS why = PG_EXCEPTION_DETAIL;
            RAISE EXCEPTION 'the payload is not JSON: %: %', SQLERRM, why USING ERRCODE = '22P02';
        END;
        IF jsonb_typeof(opts) <> 'object' THEN
            RAISE EXCEPTION 'tq''s push options must be a JSON object, got %', opts
                USING ERRCODE = '22023';
        END IF;
        SELECT string_agg(format('''%s''', k), ', ') INTO unknown FROM jsonb_object_keys(opts) k
        WHERE k <> ALL (ARRAY['delay_ms', 'run_at_unix_ms', 'priority', 'max_attempts',
                              'unique_key', 'unique_for_ms', 'after', 'on_parent_failure',
                              'group', 'group_max_at_once', 'expire_after_ms',
                              'expire_at_unix_ms', 'deadline_after_ms', 'deadline_unix_ms',
                              'replace_pending', 'debounce_max_ms']);
        IF unknown IS NOT NULL THEN
            RAISE EXCEPTION 'unknown push option %: the options are delay_ms, run_at_unix_ms, '
                'priority, max_attempts, unique_key, unique_for_ms, after, on_parent_failure, '
                'group, group_max_at_once, expire_after_ms, expire_at_unix_ms, deadline_after_ms, '
                'deadline_unix_ms, replace_pending, debounce_max_ms', unknown USING ERRCODE = '22023';
        END IF;

        given_delay := @.integer_option(opts, 'delay_ms');
        given_at := @.integer_option(opts, 'run_at_unix_ms');
        IF given_delay IS NOT NULL AND given_at IS NOT NULL THEN
            RAISE EXCEPTION 'a push takes a delay or a run-at time, not both'
                USING ERRCODE = '22023';
        END IF;
        IF given_delay NOT BETWEEN 0 AND MAX_DURATION_MS THEN
            RAISE EXCEPTION 'delay must be between 0 ms and % ms, got % ms', MAX_DURATION_MS, given_delay
                USING ERRCODE = '22023';
        END IF;
        IF given_at NOT BETWEEN 0 AND 9223372036854775807 THEN
            RAISE EXCEPTION 'run-at time must not be before 1970, got % ms', given_at
                USING ERRCODE = '22023';
        END IF;
        -- As PushOptions::from_json and store.rs's check_limits.
        IF opts ? 'expire_after_ms' AND opts ? 'expire_at_unix_ms' THEN
            RAISE EXCEPTION 'a push takes an expiry after the push (expire_after_ms) or at a '
                'time (expire_at_unix_ms), not both' USING ERRCODE = '22023';
        END IF;
        IF opts ? 'deadline_after_ms' AND opts ? 'deadline_unix_ms' THEN
            RAISE EXCEPTION 'a push takes a deadline after the push (deadline_after_ms) or at a '
                'time (deadline_unix_ms), not both' USING ERRCODE = '22023';
        END IF;
        SELECT array_agg(@.integer_option(opts, k) ORDER BY o) INTO given_limits
        FROM unnest(ARRAY['expire_after_ms', 'expire_at_unix_ms', 'deadline_after_ms',
                          'deadline_unix_ms']) WITH ORDINALITY AS u(k, o);
        IF given_limits[1] NOT BETWEEN 1 AND MAX_DURATION_MS THEN
            RAISE EXCEPTION 'the expiry must be between 1 ms and % ms, got % ms',
                MAX_DURATION_MS, given_limits[1] USING ERRCODE = '22023';
        END IF;
        IF given_limits[3] NOT BETWEEN 1 AND MAX_DURATION_MS THEN
            RAISE EXCEPTION 'the deadline must be between 1 ms and % ms, got % ms',
                MAX_DURATION_MS, given_limits[3] USING ERRCODE = '22023';
        END IF;
        IF given_limits[2] NOT BETWEEN 0 AND 9223372036854775807
           OR given_limits[4] NOT BETWEEN 0 AND 9223372036854775807 THEN
            RAISE EXCEPTION 'an expiry or deadline time must not be before 1970, got % ms',
                coalesce(given_limits[2], given_limits[4]) USING ERRCODE = '22023';
        END IF;
        expires := coalesce(now_ms + given_limits[1], given_limits[2]);
        deadline_ms := coalesce(now_ms + given_limits[3], given_limits[4]);
        due := coalesce(now_ms + given_delay, given_at, now_ms);
        IF due > now_ms AND least(expires, deadline_ms) <= due THEN
            RAISE EXCEPTION 'the task''s % (% ms since the Unix epoch) is not after its run '
                'time (% ms): it could never run',
                CASE WHEN expires <= due THEN 'expiry' ELSE 'deadline' END,
                CASE WHEN expires <= due THEN expires ELSE deadline_ms END, due
                USING ERRCODE = '22023';
        END IF;
        prio := coalesce(@.integer_option(opts, 'priority'), 0);
        IF prio NOT BETWEEN -2147483648 AND 2147483647 THEN
            RAISE EXCEPTION 'a priority is a 32-bit integer, got %', prio USING ERRCODE = '22023';
        END IF;
        tries := coalesce(@.integer_option(opts, 'max_attempts'), DEFAULT_MAX_ATTEMPTS);
        IF tries NOT BETWEEN 1 AND 4294967295 THEN
            RAISE EXCEPTION 'max attempts must be at least 1 (the first delivery is an attempt)'
                USING ERRCODE = '22023';
        END IF;

        IF opts ? 'unique_key' THEN
            IF jsonb_typeof(opts -> 'unique_key') <> 'string' THEN
                RAISE EXCEPTION 'the push option ''unique_key'' must be a string, got %',
                    opts -> 'unique_key' USING ERRCODE = '22023';
            END IF;
            wanted_key := opts ->> 'unique_key';
            IF octet_length(wanted_key) NOT BETWEEN 1 AND MAX_UNIQUE_KEY_LEN THEN
                RAISE EXCEPTION 'a unique key must be 1 to % bytes long, got % bytes',
                    MAX_UNIQUE_KEY_LEN, octet_length(wanted_key) USING ERRCODE = '22023';
            END IF;
        END IF;
        key_window := coalesce(@.integer_option(opts, 'unique_for_ms'), 0);
        IF key_window NOT BETWEEN 0 AND MAX_DURATION_MS THEN
            RAISE EXCEPTION 'the unique window must be between 0 ms and % ms, got % ms',
                MAX_DURATION_MS, key_window USING ERRCODE = '22023';
        END IF;
        IF wanted_key IS NULL AND opts ? 'unique_for_ms' THEN
            RAISE EXCEPTION 'a unique window needs a unique key: set the key first'
                USING ERRCODE = '22023';
        END IF;

        IF opts ? 'group' THEN
            IF jsonb_typeof(opts -> 'group') <> 'string' THEN
                RAISE EXCEPTION 'the push option ''group'' must be a string, got %',
                    opts -> 'group' USING ERRCODE = '22023';
            END IF;
            grp := opts ->> 'group';
            IF octet_length(grp) NOT BETWEEN 1 AND MAX_UNIQUE_KEY_LEN THEN
                RAISE EXCEPTION 'a group key must be 1 to % bytes long, got % bytes',
                    MAX_UNIQUE_KEY_LEN, octet_length(grp) USING ERRCODE = '22023';
            END IF;
        ELSIF opts ? 'group_max_at_once' THEN
            RAISE EXCEPTION 'group_max_at_once needs a group: set group too' USING ERRCODE = '22023';
        END IF;
        at_once := coalesce(@.integer_option(opts, 'group_max_at_once'), 1);
        IF at_once NOT BETWEEN 1 AND MAX_GROUP_AT_ONCE THEN
            RAISE EXCEPTION 'a group delivers 1 to % of its tasks at once, got %',
                MAX_GROUP_AT_ONCE, at_once USING ERRCODE = '22023';
        END IF;

        IF opts ? 'on_parent_failure'
           AND (jsonb_typeof(opts -> 'on_parent_failure') <> 'string'
                OR opts ->> 'on_parent_failure' NOT IN ('cancel', 'run_anyway')) THEN
            RAISE EXCEPTION 'on_parent_failure is ''cancel'' or ''run_anyway'', got %',
                opts -> 'on_parent_failure' USING ERRCODE = '22023';
        END IF;
        anyway := coalesce(opts ->> 'on_parent_failure', 'cancel') = 'run_anyway';
        IF opts ? 'after' THEN
            IF jsonb_typeof(opts -> 'after') <> 'array' THEN
                RAISE EXCEPTION 'the push option ''after'' must be an array of task ids, got %',
                    opts -> 'after' USING ERRCODE = '22023';
            END IF;
            SELECT x INTO bad FROM jsonb_array_elements(opts -> 'after') x
            WHERE jsonb_typeof(x) <> 'number' OR x::text::numeric <> trunc(x::text::numeric)
               OR x::text::numeric NOT BETWEEN 1 AND 9223372036854775807
            LIMIT 1;
            IF FOUND THEN
                RAISE EXCEPTION 'a task to wait for is named by its id, which is positive, got %',
                    bad USING ERRCODE = '22023';
            END IF;
            SELECT array_agg(DISTINCT x::int8 ORDER BY x::int8) INTO named
            FROM jsonb_array_elements_text(opts -> 'after') x;
            IF cardinality(named) > MAX_PARENTS THEN
                RAISE EXCEPTION 'a task may wait for at most % tasks, got %',
                    MAX_PARENTS, cardinality(named) USING ERRCODE = '22023';
            END IF;
        END IF;

        -- As merge.rs's check_merge.
        IF opts ? 'replace_pending' AND jsonb_typeof(opts -> 'replace_pending') <> 'boolean' THEN
            RAISE EXCEPTION 'push option replace_pending takes true or false, got %',
                opts -> 'replace_pending' USING ERRCODE = '22023';
        END IF;
        replacing := coalesce((opts ->> 'replace_pending')::boolean, false);
        debounce_max := @.integer_option(opts, 'debounce_max_ms');
        IF debounce_max NOT BETWEEN 1 AND MAX_DURATION_MS THEN
            RAISE EXCEPTION 'the longest debounce must be between 1 ms and % ms, got % ms',
                MAX_DURATION_MS, debounce_max USING ERRCODE = '22023';
        END IF;
        IF replacing OR debounce_max IS NOT NULL THEN
            conflict := CASE
                WHEN wanted_key IS NULL THEN 'needs a unique key: set the key too'
                WHEN cardinality(named) > 0
                    THEN 'cannot wait for other tasks: the holder keeps the tasks it waits for'
                WHEN grp IS NOT NULL
                    THEN 'cannot join an ordered group: the holder keeps its place in its group'
            END;
            IF conflict IS NOT NULL THEN
                RAISE EXCEPTION 'a push that replaces or debounces the pending task holding its '
                    'key %', conflict USING ERRCODE = '22023';
            END IF;
        END IF;

        SELECT * INTO pushed FROM @.push_task(push.queue, push.payload,
            CASE WHEN given_at IS NULL THEN coalesce(given_delay, 0) END::int8, given_at::int8,
            prio::int4, tries::int8, wanted_key, key_window::int8, named, anyway, grp,
            at_once::int4);
        IF pushed.stored AND (expires IS NOT NULL OR deadline_ms IS NOT NULL) THEN
            UPDATE @.tasks SET expires_at = expires, deadline = deadline_ms,
                               not_after = least(expires, deadline_ms)
            WHERE id = pushed.id;
        END IF;
        IF NOT pushed.stored AND (replacing OR debounce_max IS NOT NULL) THEN
            PERFORM @.merge_pending(pushed.id, CASE WHEN replacing THEN push.payload END,
                CASE WHEN given_at IS NULL THEN coalesce(given_delay, 0) END::int8,
                given_at::int8, debounce_max::int8);
        END IF;
        -- A key held answers the holder's id, as tq_push does (with
        -- TQ_DUPLICATE, or TQ_MERGED when merged into).
        RETURN pushed.id;
    END $$;";
