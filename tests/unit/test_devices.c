/*
 * test_devices.c — the partition allocator: power-of-two groups, alignment, exhaustion
 * with a helpful sentence, release, names, reset of error state.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "devices.h"
#include "ipuof/client.h"

static struct dev_holder
holder(const char *name, unsigned pid)
{
    struct dev_holder h = {.client_id = pid, .pid = pid};

    strcpy(h.name, name);
    strcpy(h.peer, "127.0.0.1:1234");
    return h;
}

static void
test_power_of_two(void **state)
{
    struct dev_inventory *inv = dev_inventory_new(4, 1 << 20, 1472);
    struct dev_holder h = holder("a", 1);
    struct dev_partition *p;
    char err[512];

    (void)state;
    assert_int_equal(dev_attach(inv, 3, "", &h, NULL, &p, err, sizeof err), IPUOF_E_INVAL);
    assert_non_null(strstr(err, "power of two"));
    assert_non_null(strstr(err, "ask for 4"));
    assert_int_equal(dev_attach(inv, 0, "", &h, NULL, &p, err, sizeof err), IPUOF_E_INVAL);
    assert_int_equal(dev_attach(inv, 8, "", &h, NULL, &p, err, sizeof err), IPUOF_E_INVAL);
    assert_non_null(strstr(err, "has 4 IPUs"));
    assert_int_equal(dev_attach(inv, 4, "all", &h, NULL, &p, err, sizeof err), IPUOF_OK);
    assert_int_equal(p->first, 0);
    assert_int_equal(p->count, 4);
    assert_int_equal(dev_free_count(inv), 0);
    assert_int_equal(dev_round_pow2(3), 4);
    assert_int_equal(dev_round_pow2(1), 1);
    assert_int_equal(dev_round_pow2(5), 8);
    dev_inventory_free(inv);
}

static void
test_aligned_groups(void **state)
{
    struct dev_inventory *inv = dev_inventory_new(4, 1 << 20, 1472);
    struct dev_holder a = holder("alice", 10), b = holder("bob", 20), c = holder("carol", 30);
    struct dev_partition *p1, *p2, *p3;
    char err[512];

    (void)state;
    assert_int_equal(dev_attach(inv, 1, "", &a, NULL, &p1, err, sizeof err), IPUOF_OK);
    assert_int_equal(p1->first, 0);
    assert_int_equal(dev_attach(inv, 2, "", &b, NULL, &p2, err, sizeof err), IPUOF_OK);
    assert_int_equal(p2->first, 2); /* {0,1} is broken by IPU 0 */
    assert_int_equal(dev_attach(inv, 1, "", &c, NULL, &p3, err, sizeof err), IPUOF_OK);
    assert_int_equal(p3->first, 1);
    assert_int_equal(dev_free_count(inv), 0);
    assert_string_not_equal(p1->name, p2->name);
    dev_inventory_free(inv);
}

static void
test_exhaustion_names_holders(void **state)
{
    struct dev_inventory *inv = dev_inventory_new(4, 1 << 20, 1472);
    struct dev_holder a = holder("alice", 10), b = holder("bob", 20);
    struct dev_partition *p1, *p2, *p;
    char err[512];

    (void)state;
    assert_int_equal(dev_attach(inv, 1, "one", &a, NULL, &p1, err, sizeof err), IPUOF_OK);
    assert_int_equal(dev_attach(inv, 1, "two", &b, NULL, &p2, err, sizeof err), IPUOF_OK);
    /* IPU 0 and 1 held: 2 free (2, 3), so a 4-IPU partition is impossible. */
    assert_int_equal(dev_attach(inv, 4, "", &a, NULL, &p, err, sizeof err), IPUOF_E_BUSY);
    print_message("busy: %s\n", err);
    assert_non_null(strstr(err, "2 of 4 IPUs are free (2, 3)"));
    assert_non_null(strstr(err, "alice (pid 10"));
    assert_non_null(strstr(err, "bob (pid 20"));
    assert_non_null(strstr(err, "partition 'two'"));
    assert_false(dev_can_attach(inv, 4));
    assert_true(dev_can_attach(inv, 2));
    dev_release(inv, p1);
    dev_release(inv, p2);
    assert_int_equal(dev_free_count(inv), 4);
    assert_true(dev_can_attach(inv, 4));
    dev_inventory_free(inv);
}

static void
test_fragmented(void **state)
{
    struct dev_inventory *inv = dev_inventory_new(4, 1 << 20, 1472);
    struct dev_holder a = holder("a", 1);
    struct dev_partition *p0, *p2, *p;
    char err[512];

    (void)state;
    assert_int_equal(dev_attach(inv, 1, "", &a, NULL, &p0, err, sizeof err), IPUOF_OK);
    assert_int_equal(dev_attach(inv, 2, "", &a, NULL, &p2, err, sizeof err), IPUOF_OK);
    dev_release(inv, p2);
    assert_int_equal(dev_attach(inv, 1, "", &a, NULL, &p, err, sizeof err), IPUOF_OK);
    assert_int_equal(p->first, 1);
    dev_release(inv, p0);
    /* Free: 0, 2, 3. A pair exists at {2,3}; four do not fit. */
    assert_true(dev_can_attach(inv, 2));
    assert_int_equal(dev_attach(inv, 4, "", &a, NULL, &p2, err, sizeof err), IPUOF_E_BUSY);
    assert_non_null(strstr(err, "3 of 4 IPUs are free"));
    dev_inventory_free(inv);
}

static void
test_names(void **state)
{
    struct dev_inventory *inv = dev_inventory_new(2, 1 << 20, 1472);
    struct dev_holder a = holder("a", 1);
    struct dev_partition *p, *q;
    char err[512], longname[100];

    (void)state;
    assert_int_equal(dev_attach(inv, 1, "train", &a, NULL, &p, err, sizeof err), IPUOF_OK);
    assert_int_equal(dev_attach(inv, 1, "train", &a, NULL, &q, err, sizeof err), IPUOF_E_BUSY);
    assert_non_null(strstr(err, "already in use"));
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    assert_int_equal(dev_attach(inv, 1, longname, &a, NULL, &q, err, sizeof err), IPUOF_E_INVAL);
    assert_ptr_equal(dev_find_partition(inv, "train"), p);
    assert_null(dev_find_partition(inv, "nope"));
    dev_release(inv, NULL);
    dev_inventory_free(inv);
    dev_inventory_free(NULL);
}

static void
test_error_state_and_clear(void **state)
{
    struct dev_inventory *inv = dev_inventory_new(2, 1 << 20, 1472);
    struct dev_holder a = holder("a", 1);
    struct dev_partition *p;
    char err[512];

    (void)state;
    inv->ipus[0].state = DEV_ERROR;
    strcpy(inv->ipus[0].error, "parity");
    assert_int_equal(dev_attach(inv, 2, "", &a, NULL, &p, err, sizeof err), IPUOF_E_BUSY);
    assert_non_null(strstr(err, "IPU 0 is in error"));
    dev_clear(inv, 0);
    assert_int_equal(dev_attach(inv, 2, "", &a, NULL, &p, err, sizeof err), IPUOF_OK);
    dev_inventory_free(inv);
}

/* V-IPU partitions (vipu create partition): their IPUs are reserved for attaches that give
 * their name, every refusal says why, and removal returns the IPUs. */
static void
test_vipu_partitions(void **state)
{
    struct dev_inventory *inv = dev_inventory_new(8, 1 << 20, 1472);
    struct dev_holder a = holder("a", 1), b = holder("b", 2);
    struct dev_partition *p, *q;
    struct dev_vpart *v, *w;
    char err[1024];

    (void)state;
    assert_int_equal(dev_vpart_create(inv, "pt", 4, 2, 1, &v, err, sizeof err), IPUOF_OK);
    assert_int_equal(v->first, 0);
    assert_int_equal(v->num_gcds, 2);
    assert_ptr_equal(dev_vpart_find(inv, "pt"), v);
    assert_int_equal(dev_free_count(inv), 4); /* reserved IPUs are not free for others */
    /* Bad requests, each with what would be right. */
    assert_int_equal(dev_vpart_create(inv, "x", 3, 1, 0, &w, err, sizeof err), IPUOF_E_INVAL);
    assert_non_null(strstr(err, "--size 3: a partition is a power of two IPUs"));
    assert_int_equal(dev_vpart_create(inv, "x", 2, 4, 0, &w, err, sizeof err), IPUOF_E_INVAL);
    assert_non_null(strstr(err, "--num-gcds 4: the GCDs divide the partition's 2 IPUs"));
    assert_int_equal(dev_vpart_create(inv, "a/b", 2, 1, 0, &w, err, sizeof err), IPUOF_E_INVAL);
    assert_non_null(strstr(err, "has the character 0x2f"));
    assert_int_equal(dev_vpart_create(inv, "pt", 2, 1, 0, &w, err, sizeof err), IPUOF_E_BUSY);
    assert_non_null(strstr(err, "partition 'pt' already exists"));
    assert_int_equal(dev_vpart_create(inv, "big", 8, 1, 0, &w, err, sizeof err), IPUOF_E_BUSY);
    assert_non_null(strstr(err, "IPUs 0-3 reserved for partition 'pt'"));
    /* An attach without the name never takes the reserved IPUs. */
    assert_int_equal(dev_attach(inv, 4, "", &b, NULL, &q, err, sizeof err), IPUOF_OK);
    assert_int_equal(q->first, 4);
    assert_int_equal(dev_attach(inv, 1, "", &b, NULL, &p, err, sizeof err), IPUOF_E_BUSY);
    assert_non_null(strstr(err, "0 of 8 IPUs are free"));
    assert_non_null(strstr(err, "IPUs 0-3 reserved for partition 'pt'"));
    /* An attach with the name takes them, up to the partition's size. */
    assert_int_equal(dev_attach(inv, 8, "pt", &a, NULL, &p, err, sizeof err), IPUOF_E_INVAL);
    assert_non_null(strstr(err, "partition 'pt' has 4 IPUs; this attach asks for 8"));
    assert_int_equal(dev_attach(inv, 4, "pt", &a, NULL, &p, err, sizeof err), IPUOF_OK);
    assert_int_equal(p->first, 0);
    assert_ptr_equal(dev_vpart_holder(inv, v), p);
    dev_release(inv, p);
    assert_null(dev_vpart_holder(inv, v));
    assert_int_equal(dev_attach(inv, 2, "pt", &a, NULL, &p, err, sizeof err), IPUOF_OK);
    assert_int_equal(p->first, 0);
    dev_release(inv, p);
    /* An IPU in error fails the partition (PS_FAILED) until it is reset. */
    inv->ipus[1].state = DEV_ERROR;
    assert_true(dev_vpart_failed(inv, v));
    assert_int_equal(dev_attach(inv, 4, "pt", &a, NULL, &p, err, sizeof err), IPUOF_E_BUSY);
    assert_non_null(strstr(err, "partition 'pt' is PS_FAILED"));
    dev_clear(inv, 1);
    assert_false(dev_vpart_failed(inv, v));
    assert_ptr_equal(inv->ipus[1].vpart, v); /* a reset keeps the reservation */
    /* Removed: its IPUs are anybody's again; its name attaches as an ordinary name. */
    dev_vpart_remove(inv, v);
    assert_null(dev_vpart_find(inv, "pt"));
    assert_int_equal(dev_free_count(inv), 4);
    assert_int_equal(dev_attach(inv, 4, "", &a, NULL, &p, err, sizeof err), IPUOF_OK);
    assert_int_equal(p->first, 0);
    /* A name held by an attached partition cannot become a V-IPU partition. */
    dev_release(inv, q);
    assert_int_equal(dev_vpart_create(inv, p->name, 4, 1, 0, &w, err, sizeof err), IPUOF_E_BUSY);
    assert_non_null(strstr(err, "attached by a program"));
    assert_int_equal(dev_vpart_create(inv, "second", 4, 4, 0, &w, err, sizeof err), IPUOF_OK);
    assert_int_equal(w->first, 4);
    dev_inventory_free(inv); /* frees the V-IPU partition too (ASan checks) */
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_power_of_two),       cmocka_unit_test(test_aligned_groups),
        cmocka_unit_test(test_exhaustion_names_holders), cmocka_unit_test(test_fragmented),
        cmocka_unit_test(test_names),              cmocka_unit_test(test_error_state_and_clear),
        cmocka_unit_test(test_vipu_partitions),
    };
    return cmocka_run_group_tests_name("devices", tests, NULL, NULL);
}
