-- examples/postgresql/order_and_receipt.sql: an order and the task that
-- sends its receipt, in one commit. Run with psql on a database where tq
-- has opened its schema (`tq`, the default) once.
CREATE TABLE orders (id bigint PRIMARY KEY, email text NOT NULL);

BEGIN;
INSERT INTO orders VALUES (1, 'ada@example.com');
SELECT tq.push('emails', '{"receipt_for": 1}');
COMMIT;

-- An order rolled back takes its task with it: no receipt is sent.
BEGIN;
INSERT INTO orders VALUES (2, 'bob@example.com');
SELECT tq.push('emails', '{"receipt_for": 2}');
ROLLBACK;
