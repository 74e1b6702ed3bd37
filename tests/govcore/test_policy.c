/* test_policy.c - proposals, the clamp to the board's table, and apply/restore. */
#include "check.h"
#include "fake_tree.h"
#include "policy.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static void test_rules(void)
{
    gc_workload w = {0, -1.0, 4, 256, 30, 0, 0, 0, 0, 0, 0, 0};

    CHECK(gc_propose_rules(&w) == 510.0);
    w.seq_len = 40;
    CHECK(gc_propose_rules(&w) == 612.0);
    w.layers = 12;
    w.seq_len = 53;
    CHECK(gc_propose_rules(&w) == 714.0);
    w.seq_len = 128;
    CHECK(gc_propose_rules(&w) == 816.0);
    w.gpu_util_pct = 22.0;
    CHECK(gc_propose_rules(&w) == 1020.0);
    w.gpu_util_pct = 22.5;
    CHECK(gc_propose_rules(&w) == 816.0);
}

static void test_model_family(void)
{
    int dec = -1;

    CHECK(gc_model_family("bert", &dec) == 0 && dec == 0);
    CHECK(gc_model_family("Pythia", &dec) == 0 && dec == 1);
    CHECK(gc_model_family("deberta-v2", &dec) == 0 && dec == 0);
    CHECK(gc_model_family("toaster", &dec) == -EINVAL);
    /* a model's own name: the family of its leading letters */
    CHECK(gc_model_family("qwen2.5-0.5b", &dec) == 0 && dec == 1);
    CHECK(gc_model_family("llama-3.2-1b", &dec) == 0 && dec == 1);
    CHECK(gc_model_family("smollm2-135m", &dec) == 0 && dec == 1);
    CHECK(gc_model_family("bert-base", &dec) == 0 && dec == 0);
    CHECK(gc_model_family("toaster-2", &dec) == -EINVAL);
    CHECK(gc_model_family("qwenx", &dec) == -EINVAL); /* letters all the way: no family prefix */
    CHECK(gc_model_family("-1b", &dec) == -EINVAL);
}

/* Set field f of w from text (the grammar's setter, model buffer unused). */
static int set(gc_workload *w, const char *key, const char *text, char *err, size_t len)
{
    char model[GC_MODEL_NAME_MAX];

    return gc_workload_set(w, gc_workload_field_of(key, strlen(key)), text, strlen(text), model,
                           sizeof model, err, len);
}

static void test_method_keys(void)
{
    gc_workload w = {1, -1.0, 24, 896, 200, 0, 0, 0, 0, 0, 0, 0};
    char err[GC_ERR_MAX], text[256];

    CHECK(gc_workload_field_of("peft", 4) == GC_WF_PEFT &&
          gc_workload_field_of("tokens_per_step", 15) == GC_WF_TOKENS_PER_STEP &&
          gc_workload_field_of("seq-len", 7) == -1 && gc_workload_field_of("seq_len", 7) == 3);
    for (int k = 0; k < GC_N_METHOD_KEYS; k++) /* the method keys, in gc_method_keys' order */
        CHECK(strcmp(gc_workload_fields[GC_WF_PEFT + k].key, gc_method_keys[k]) == 0);
    /* defaults: full fine-tuning in fp32 */
    CHECK(gc_workload_check(&w, err, sizeof err) == 0);
    CHECK(gc_trainable_share(&w) == 1.0 && gc_weight_bits(&w) == 32.0);
    gc_method_format(&w, text, sizeof text);
    CHECK(strcmp(text, "") == 0);
    CHECK(set(&w, "peft", "LoRA", err, sizeof err) == 0 && w.peft == GC_PEFT_LORA);
    CHECK(set(&w, "rank", "16", err, sizeof err) == 0 && w.rank == 16.0);
    CHECK(set(&w, "precision", "bf16", err, sizeof err) == 0 && w.precision == GC_PRECISION_BF16);
    CHECK(set(&w, "tokens_per_step", "1600.25", err, sizeof err) == 0 && w.tokens_per_step == 1600.25);
    CHECK(gc_workload_check(&w, err, sizeof err) == 0);
    CHECK(gc_weight_bits(&w) == 16.0);
    CHECK(fabs(gc_trainable_share(&w) - 4.0 * 16 * 896 * 24 / (12.0 * 24 * 896 * 896)) < 1e-15);
    gc_method_format(&w, text, sizeof text);
    CHECK(strcmp(text, " peft=lora rank=16 precision=bf16 tokens_per_step=1600.25") == 0);
    gc_method_format(&w, text, 10); /* cut: never half a key */
    CHECK(strcmp(text, "") == 0);
    /* refusals name the key */
    CHECK(set(&w, "peft", "lorx", err, sizeof err) == -EINVAL && strstr(err, "peft"));
    CHECK(set(&w, "rank", "0", err, sizeof err) == -EINVAL && strstr(err, "rank"));
    CHECK(set(&w, "rank", "1.5", err, sizeof err) == -EINVAL && strstr(err, "rank"));
    CHECK(set(&w, "weight_bits", "6", err, sizeof err) == -EINVAL && strstr(err, "weight_bits"));
    CHECK(set(&w, "precision", "fp8", err, sizeof err) == -EINVAL && strstr(err, "precision"));
    CHECK(set(&w, "batch_size", "nan", err, sizeof err) == -EINVAL && strstr(err, "batch_size"));
    CHECK(set(&w, "tokens_per_step", "-1", err, sizeof err) == -EINVAL && strstr(err, "tokens_per_step"));
    CHECK(gc_workload_set(&w, GC_N_WORKLOAD_FIELDS, "1", 1, text, sizeof text, err, sizeof err) == -EINVAL);
    /* keys that disagree */
    w.weight_bits = 4.0;
    CHECK(gc_workload_check(&w, err, sizeof err) == -EINVAL && strstr(err, "qlora"));
    w.peft = GC_PEFT_QLORA;
    CHECK(gc_workload_check(&w, err, sizeof err) == 0 && gc_weight_bits(&w) == 4.0);
    w.weight_bits = 16.0;
    CHECK(gc_workload_check(&w, err, sizeof err) == -EINVAL);
    w.weight_bits = 0.0;
    CHECK(gc_weight_bits(&w) == 4.0);
    w.peft = GC_PEFT_NONE;
    CHECK(gc_workload_check(&w, err, sizeof err) == -EINVAL && strstr(err, "rank"));
    w.rank = 0.0;
    w.trainable_params = 300e6; /* more than the stack (12 L d^2 = 231M): the share is at most 1 */
    CHECK(gc_workload_check(&w, err, sizeof err) == 0 && gc_trainable_share(&w) == 1.0);
}

/* Issue 37: one grammar, bounds on every field, and nothing no Jetson can train. */
static void test_workload_grammar(void)
{
    gc_workload w = {0, -1.0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    char err[GC_ERR_MAX], model[GC_MODEL_NAME_MAX] = "";
    unsigned have = 0;
    double v;

    CHECK(gc_workload_parse("model=bert,layers=12,hidden=768,seq_len=64.5,name=a/b", &w, model,
                            sizeof model, &have, err, sizeof err) == 0);
    CHECK(strcmp(model, "bert") == 0 && w.layers == 12 && w.seq_len == 64.5 && have == (GC_WORKLOAD_REQUIRED | 1u << GC_WF_NAME));
    CHECK(gc_workload_check(&w, err, sizeof err) == 0);
    CHECK(gc_parse_decimal("0x10", 4, &v) == -EINVAL && gc_parse_decimal("1e3", 3, &v) == -EINVAL &&
          gc_parse_decimal("1_2", 3, &v) == -EINVAL && gc_parse_decimal("+1", 2, &v) == -EINVAL &&
          gc_parse_decimal("12.5", 4, &v) == 0 && v == 12.5);
    have = 0;
    CHECK(gc_workload_parse("layers=1e308", &w, model, sizeof model, &have, err, sizeof err) == -EINVAL &&
          strstr(err, "workload layers: not a plain decimal number"));
    have = 0;
    CHECK(gc_workload_parse("hidden=1000000000", &w, model, sizeof model, &have, err, sizeof err) == -EINVAL &&
          strstr(err, "whole number from 1 to 65536"));
    have = 0;
    CHECK(gc_workload_parse("layers=12, hidden=768", &w, model, sizeof model, &have, err, sizeof err) == -EINVAL &&
          strstr(err, "blank"));
    have = 0;
    CHECK(gc_workload_parse("seq-len=5", &w, model, sizeof model, &have, err, sizeof err) == -EINVAL &&
          strstr(err, "unknown key 'seq-len'"));
    /* what the fields allow but no model of the shape is */
    w.layers = 1024, w.hidden = 65536;
    CHECK(gc_workload_check(&w, err, sizeof err) == -EINVAL && strstr(err, "largest Jetson"));
    w.layers = 12, w.hidden = 768, w.trainable_params = 999999999999.0;
    CHECK(gc_workload_check(&w, err, sizeof err) == -EINVAL && strstr(err, "can have"));
    w.peft = GC_PEFT_LORA, w.rank = 8, w.trainable_params = 1000;
    CHECK(gc_workload_check(&w, err, sizeof err) == -EINVAL && strstr(err, "disagree"));
    w.trainable_params = 0, w.seq_len = INFINITY;
    CHECK(gc_workload_check(&w, err, sizeof err) == -EINVAL && strstr(err, "seq_len"));
}

static void test_policy_names(void)
{
    int p = -1;

    CHECK(gc_policy_parse("mlg", &p) == 0 && p == GC_POLICY_MLG);
    CHECK(gc_policy_parse("maxn", &p) == 0 && p == GC_POLICY_MAXN);
    CHECK(gc_policy_parse("roofline", &p) == 0 && p == GC_POLICY_ROOFLINE);
    CHECK(strcmp(gc_policy_name(GC_POLICY_ROOFLINE), "roofline") == 0);
    CHECK(gc_policy_parse("fast", &p) == -EINVAL);
    CHECK(strcmp(gc_policy_name(GC_POLICY_RULES), "rules") == 0);
}

/* The table is the one list: every entry whole, names unique, the named indices its own, the
 * list for messages made from it, a number outside it refused. */
static void test_policy_table(void)
{
    char list[128];
    int i, k, p = -1;

    CHECK(gc_n_policies == 5);
    for (i = 0; i < gc_n_policies; i++) {
        const gc_policy_entry *e = gc_policy_of(i);

        CHECK(e == &gc_policies[i] && e->name && e->name[0] && e->help && e->help[0] && e->propose);
        CHECK(gc_policy_parse(e->name, &p) == 0 && p == i && strcmp(gc_policy_name(i), e->name) == 0);
        for (k = 0; k < i; k++)
            CHECK(strcmp(gc_policies[k].name, e->name) != 0);
    }
    CHECK(strcmp(gc_policies[GC_POLICY_FFG].name, "ffg") == 0);
    CHECK(gc_policies[GC_POLICY_MAXN].flags == (GC_POLICY_PINS_NOTHING | GC_POLICY_NO_WORKLOAD));
    CHECK(gc_policies[GC_POLICY_FFG].flags == GC_POLICY_NO_WORKLOAD);
    CHECK(gc_policies[GC_POLICY_ROOFLINE].flags == (GC_POLICY_NEEDS_MODEL_DIR | GC_POLICY_TAKES_OBJECTIVE));
    CHECK(gc_policies[GC_POLICY_MLG].flags == 0 && gc_policies[GC_POLICY_RULES].flags == 0);
    CHECK(gc_policy_of(-1) == NULL && gc_policy_of(gc_n_policies) == NULL);
    CHECK(strcmp(gc_policy_name(gc_n_policies), "?") == 0);
    gc_policy_list(list, sizeof list);
    CHECK(strcmp(list, "mlg, ffg, rules, maxn or roofline") == 0);
    gc_policy_list(list, 8); /* cut, still a string */
    CHECK(strcmp(list, "mlg, ff") == 0);
}

/* A one-class tree: it always proposes classes[0], which the tests set, to test the clamp. */
static void fixed_score(double *input, double *output)
{
    (void)input;
    output[0] = 1.0;
}
static const char *const one_feature[] = {"seq_len"};

static void test_decide_clamps_to_table(void)
{
    const char *root = fake_tree_make(FAKE_JP6, ORIN_13_LEVELS);
    double classes[1];
    gc_tree_model m = {"test", fixed_score, 1, one_feature, 1, classes, {50, 50}, 700.0, "", "", "", "", 0, {0}, "", "", -1, 0, {0}, {0}, 0, 0};
    gc_workload w = {0, 60.0, 12, 768, 64, 0, 0, 0, 0, 0, 0, 0};
    gc_board b;
    gc_decision d;

    CHECK(gc_board_open(&b, root) == 0);
    classes[0] = 800.0; /* not a level: snapped to the nearest (828.75, not 726.75) */
    CHECK(gc_decide(&b, &m, NULL, GC_POLICY_MLG, &w, &d) == 0);
    CHECK(d.proposed_mhz == 800.0);
    CHECK_EQ_U64(d.level_hz, 828750000);
    classes[0] = 1350.0; /* within one level step above the top: snapped to it, as `pin` does */
    CHECK(gc_decide(&b, &m, NULL, GC_POLICY_MLG, &w, &d) == 0);
    CHECK_EQ_U64(d.level_hz, 1300500000);
    classes[0] = 99999.0; /* far above the table: refused, as `pin 99999` is (never the top level) */
    CHECK(gc_decide(&b, &m, NULL, GC_POLICY_MLG, &w, &d) == -EINVAL);
    CHECK(d.level_hz == 0 && strstr(b.err, "99999 MHz is outside the board's table") != NULL);
    classes[0] = -500.0; /* not a clock at all: refused */
    CHECK(gc_decide(&b, &m, NULL, GC_POLICY_MLG, &w, &d) == -EINVAL);
    CHECK(strstr(b.err, "-500 MHz, which is not a clock") != NULL);
    classes[0] = INFINITY;
    CHECK(gc_decide(&b, &m, NULL, GC_POLICY_MLG, &w, &d) == -EINVAL);
    classes[0] = NAN;
    CHECK(gc_decide(&b, &m, NULL, GC_POLICY_MLG, &w, &d) == -EINVAL);
    CHECK(strstr(b.err, "not a clock") != NULL);
    CHECK(gc_decide(&b, &m, NULL, GC_POLICY_FFG, &w, &d) == 0);
    CHECK_EQ_U64(d.level_hz, 726750000);
    CHECK(gc_decide(&b, &m, NULL, GC_POLICY_MAXN, &w, &d) == 0);
    CHECK(gc_decide(&b, &m, NULL, gc_n_policies, &w, &d) == -EINVAL && strstr(b.err, "unknown policy"));
    CHECK(gc_decide(&b, &m, NULL, -1, &w, &d) == -EINVAL);
    CHECK(d.level_hz == 0 && d.proposed_mhz == 0.0);
    w.layers = 0; /* bad workload */
    CHECK(gc_decide(&b, &m, NULL, GC_POLICY_RULES, &w, &d) == -EINVAL);
    CHECK(strstr(b.err, "layers") != NULL);
    fake_tree_remove(root);
}

static void test_features_match_sklearn_float32(void)
{
    const char *const names[] = {"is_decoder", "gpu_util_pct", "layers", "hidden", "seq_len",
                                 "log10_c_tok", "intensity"};
    double cls[1] = {510.0}, x[8];
    gc_tree_model m = {"t", fixed_score, 7, names, 1, cls, {41.0, 77.0}, 510.0, "", "", "", "", 0, {0}, "", "", -1, 0, {0}, {0}, 0, 0};
    gc_workload w = {1, -1.0, 12, 768, 0.1, 0, 0, 0, 0, 0, 0, 0};
    char err[128];

    CHECK(gc_features(&m, &w, x, err, sizeof err) == 0);
    CHECK(x[0] == 1.0);
    CHECK(x[1] == 77.0);                 /* unknown util: the decoder default */
    CHECK(x[4] == (double)(float)0.1);   /* float32-rounded, as scikit-learn compares */
    CHECK(fabs(x[5] - log10(12.0 * 12 * 768 * 768 + 3.0 * 12 * 0.1 * 768)) < 1e-6);
    {
        const char *const bad[] = {"shoe_size"};
        gc_tree_model mb = {"t", fixed_score, 1, bad, 1, cls, {0, 0}, 510.0, "", "", "", "", 0, {0}, "", "", -1, 0, {0}, {0}, 0, 0};
        CHECK(gc_features(&mb, &w, x, err, sizeof err) == -EINVAL);
        CHECK(strstr(err, "shoe_size") != NULL);
    }
}

static void test_builtin_tree_is_usable(void)
{
    gc_workload w = {0, -1.0, 12, 768, 64, 0, 0, 0, 0, 0, 0, 0};
    double mhz = 0;
    char err[128];
    int i, found = 0;

    CHECK(gc_builtin_tree.n_classes >= 2);
    CHECK(gc_propose_tree(&gc_builtin_tree, &w, &mhz, err, sizeof err) == 0);
    for (i = 0; i < gc_builtin_tree.n_classes; i++)
        found |= gc_builtin_tree.classes_mhz[i] == mhz;
    CHECK(found);
}

static void test_apply_then_maxn_restores(void)
{
    const char *root = fake_tree_make(FAKE_JP5, ORIN_11_LEVELS);
    char state_dir[600];
    gc_workload w = {0, 60.0, 12, 768, 128, 0, 0, 0, 0, 0, 0, 0};
    gc_clock_state st;
    gc_decision d;
    gc_board b;

    snprintf(state_dir, sizeof state_dir, "%s/state", root);
    CHECK(gc_board_open(&b, root) == 0);
    CHECK(gc_apply(&b, &gc_builtin_tree, NULL, GC_POLICY_RULES, &w, state_dir, &d) == 0);
    CHECK(gc_clock_read(&b, &st) == 0);
    CHECK_EQ_U64(st.min_hz, 816000000);
    CHECK_EQ_U64(st.max_hz, 816000000);
    CHECK(gc_apply(&b, &gc_builtin_tree, NULL, GC_POLICY_MAXN, &w, state_dir, &d) == 0);
    CHECK(gc_clock_read(&b, &st) == 0);
    CHECK_EQ_U64(st.min_hz, 306000000);
    CHECK_EQ_U64(st.max_hz, 1300500000);
    fake_tree_remove(root);
}

static const char *good_roofline =
    "# a comment\n"
    "version=1\nk_gauge=1e12\nq_gcyc=1.8e-06\nm_s=3.4e-09\nh0_s=3.3e-05\nh1_s=6.8e-06\n"
    "p_idle_w=6.1\nc_w=18.7\nc_idle_w=5.9\ne_mem_j=6e-09\n"
    "vf_mhz=0,560,1300.5\nvf_v=0.61,0.61,0.96\n";

static int write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    if (!f)
        return -1;
    fputs(text, f);
    return fclose(f);
}

/* Replace the first line starting with `key=` of good_roofline by `line` (or drop it: ""). */
static void roofline_variant(const char *path, const char *key, const char *line)
{
    char buf[2048] = "";
    const char *p = good_roofline;
    size_t klen = strlen(key);

    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t n = (size_t)(nl - p) + 1;

        if (strncmp(p, key, klen) == 0 && p[klen] == '=')
            strcat(buf, line);
        else
            strncat(buf, p, n);
        p += n;
    }
    CHECK(write_text(path, buf) == 0);
}

static void test_roofline_load_is_strict(void)
{
    const char *root = fake_tree_make(FAKE_JP5, ORIN_11_LEVELS);
    static const char *const bad[][2] = {
        {"q_gcyc", "q_gcyc=-1\n"},             /* negative */
        {"q_gcyc", "q_gcyc=nan\n"},            /* not finite */
        {"q_gcyc", "q_gcyc=1e-6x\n"},          /* trailing garbage */
        {"q_gcyc", "q_gcyc= 1\n"},             /* leading space */
        {"q_gcyc", ""},                         /* missing */
        {"q_gcyc", "q_gcyc=1\nq_gcyc=1\n"},    /* repeated */
        {"q_gcyc", "q_gcyc=1\nshoe=1\n"},      /* unknown */
        {"q_gcyc", "q_gcyc\n"},                /* no value */
        {"version", "version=2\n"},            /* another format */
        {"k_gauge", "k_gauge=0\n"},            /* no time scale */
        {"vf_v", "vf_v=0.61,0.96\n"},          /* lengths differ */
        {"vf_mhz", "vf_mhz=0,1300.5,560\n"},   /* not ascending */
        {"vf_v", "vf_v=0.61,0,0.96\n"},        /* zero volts */
        {"vf_mhz", "vf_mhz=\n"},               /* empty list */
    };
    char path[600], err[256];
    gc_roofline r;
    size_t i;

    snprintf(path, sizeof path, "%s/roofline.txt", root);
    CHECK(write_text(path, good_roofline) == 0);
    CHECK(gc_roofline_load(path, &r, err, sizeof err) == 0);
    CHECK(r.n_vf == 3 && r.vf_mhz[2] == 1300.5 && r.c_w == 18.7 && r.k_gauge == 1e12);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        roofline_variant(path, bad[i][0], bad[i][1]);
        err[0] = 0;
        CHECK(gc_roofline_load(path, &r, err, sizeof err) == -EINVAL);
        CHECK(strstr(err, "roofline.txt") != NULL);
    }
    snprintf(path, sizeof path, "%s/none.txt", root);
    CHECK(gc_roofline_load(path, &r, err, sizeof err) == -ENOENT);
    fake_tree_remove(root);
}

static void test_roofline_policy_on_13_levels(void)
{
    const char *root = fake_tree_make(FAKE_JP6, ORIN_13_LEVELS);
    gc_workload w = {0, -1.0, 12, 768, 64, 0, 0, 0, 0, 0, 0, 0};
    double classes[1] = {700.0};
    gc_tree_model m = {"test", fixed_score, 1, one_feature, 1, classes, {50, 50}, 700.0, "", "", "", "", 0, {0}, "", "", -1, 0, {0}, {0}, 0, 0};
    char path[600], err[256];
    double e, best_e = 1e300, best_mhz = 0;
    gc_roofline r;
    gc_decision d;
    gc_board b;
    int i;

    snprintf(path, sizeof path, "%s/roofline.txt", root);
    CHECK(write_text(path, good_roofline) == 0);
    CHECK(gc_roofline_load(path, &r, err, sizeof err) == 0);
    CHECK(gc_board_open(&b, root) == 0);
    for (i = 0; i < b.n_freqs; i++) { /* the argmin by brute force */
        e = gc_roofline_energy_j(&r, &w, gc_hz_to_mhz(b.freqs_hz[i]));
        CHECK(e > 0);
        if (e < best_e) {
            best_e = e;
            best_mhz = gc_hz_to_mhz(b.freqs_hz[i]);
        }
    }
    CHECK(best_mhz > 114.75 && best_mhz < 1300.5); /* a U: the optimum is inside the table */
    CHECK(gc_decide(&b, &m, &r, GC_POLICY_ROOFLINE, &w, &d) == 0);
    CHECK(d.proposed_mhz == best_mhz);
    CHECK_EQ_U64(d.level_hz, (uint64_t)(best_mhz * 1e6 + 0.5));
    CHECK(gc_decide(&b, &m, NULL, GC_POLICY_ROOFLINE, &w, &d) == -EINVAL);
    CHECK(strstr(b.err, "roofline") != NULL);
    fake_tree_remove(root);
}

static void test_objective_names(void)
{
    int k = -1;

    CHECK(gc_objective_parse("energy", &k) == 0 && k == GC_OBJECTIVE_ENERGY);
    CHECK(gc_objective_parse("edp", &k) == 0 && k == GC_OBJECTIVE_EDP);
    CHECK(gc_objective_parse("ed2p", &k) == 0 && k == GC_OBJECTIVE_ED2P);
    CHECK(gc_objective_parse("EDP", &k) == -EINVAL);
    CHECK(strcmp(gc_objective_name(GC_OBJECTIVE_ED2P), "ed2p") == 0);
    CHECK(strcmp(gc_objective_name(7), "?") == 0);
}

/* The roofline test board: a JetPack 6 Orin with 13 levels and good_roofline loaded. */
static const char *roofline_board(gc_board *b, gc_roofline *r)
{
    const char *root = fake_tree_make(FAKE_JP6, ORIN_13_LEVELS);
    char path[600], err[256];

    snprintf(path, sizeof path, "%s/roofline.txt", root);
    CHECK(write_text(path, good_roofline) == 0);
    CHECK(gc_roofline_load(path, r, err, sizeof err) == 0);
    CHECK(gc_board_open(b, root) == 0);
    return root;
}

static double level_mhz(const gc_board *b, int i)
{
    return gc_hz_to_mhz(b->freqs_hz[i]);
}

static void test_roofline_time_is_a_over_f_plus_b(void)
{
    gc_roofline r;
    gc_board b;
    const char *root = roofline_board(&b, &r);
    gc_workload w = {0, -1.0, 12, 768, 64, 0, 0, 0, 0, 0, 0, 0};
    double a = (12.0 * 12 * 768 * 768 + 3.0 * 12 * 64 * 768) / 1e12 + 1.8e-06 * 12 / 64;
    double bb = 3.4e-09 * (768.0 * 12) + (3.3e-05 + 6.8e-06 * 12) / 64;

    CHECK(fabs(gc_roofline_time_s(&r, &w, 500.0) - (a / 0.5 + bb)) < 1e-15);
    CHECK(gc_roofline_time_s(&r, &w, 300.0) > gc_roofline_time_s(&r, &w, 1300.5));
    fake_tree_remove(root);
}

/* The lowest level at or above `from` whose predicted time is within pct of the top level's. */
static int lowest_within(const gc_board *b, const gc_roofline *r, const gc_workload *w, int from, double pct)
{
    double top_s = gc_roofline_time_s(r, w, level_mhz(b, b->n_freqs - 1));
    int i;

    for (i = from; i < b->n_freqs - 1; i++)
        if (gc_roofline_time_s(r, w, level_mhz(b, i)) <= top_s * (1.0 + pct / 100.0))
            break;
    return i;
}

static void test_slowdown_bound_raises_a_policy_level(void)
{
    gc_roofline r;
    gc_board b;
    const char *root = roofline_board(&b, &r);
    double classes[1] = {216.75}; /* the tree's choice: level 1 of 13 */
    gc_tree_model m = {"test", fixed_score, 1, one_feature, 1, classes, {50, 50}, 522.75, "", "", "", "", 0, {0}, "", "", -1, 0, {0}, {0}, 0, 0};
    gc_workload w = {0, -1.0, 12, 768, 64, 0, 0, 0, 0, 0, 0, 0};
    gc_goal g = {GC_OBJECTIVE_ENERGY, 0.0};
    double pcts[] = {0.0, 1.0, 5.0, 20.0, 50.0, 100.0, 1e9}, top_s, t;
    gc_decision d;
    size_t k;
    int want, raised = 0;

    for (k = 0; k < sizeof pcts / sizeof pcts[0]; k++) {
        g.max_slowdown_pct = pcts[k];
        CHECK(gc_decide_goal(&b, &m, &r, GC_POLICY_MLG, &w, &g, &d) == 0);
        want = lowest_within(&b, &r, &w, 1, pcts[k]);
        CHECK_EQ_U64(d.level_hz, b.freqs_hz[want]);
        CHECK_EQ_U64(d.policy_level_hz, 216750000);
        CHECK(d.proposed_mhz == 216.75);
        raised += want > 1 && want < b.n_freqs - 1;
        /* the trade: against the top level, as the model predicts it */
        top_s = gc_roofline_time_s(&r, &w, 1300.5);
        t = gc_roofline_time_s(&r, &w, level_mhz(&b, want));
        CHECK_EQ_U64(d.trade_vs_hz, 1300500000);
        CHECK(fabs(d.trade_s_pct - 100.0 * (t / top_s - 1.0)) < 1e-9);
        CHECK(d.trade_s_pct <= pcts[k] + 1e-9);
        CHECK(fabs(d.trade_j_pct - 100.0 * (gc_roofline_energy_j(&r, &w, level_mhz(&b, want)) /
                                            gc_roofline_energy_j(&r, &w, 1300.5) - 1.0)) < 1e-9);
        CHECK(d.goal.max_slowdown_pct == pcts[k]);
    }
    CHECK(raised > 0); /* some bound lands strictly between the tree's level and the top */
    g.max_slowdown_pct = 0.0; /* bound 0: only the top level is as fast as itself */
    CHECK(gc_decide_goal(&b, &m, &r, GC_POLICY_FFG, &w, &g, &d) == 0);
    CHECK_EQ_U64(d.level_hz, 1300500000);
    CHECK_EQ_U64(d.policy_level_hz, 522750000);
    g.max_slowdown_pct = 1e9; /* a bound every level meets: unchanged */
    CHECK(gc_decide_goal(&b, &m, &r, GC_POLICY_RULES, &w, &g, &d) == 0);
    CHECK(d.level_hz == d.policy_level_hz && d.level_hz != 0);
    /* no goal: as gc_decide, with the trade predicted since the curve is given */
    CHECK(gc_decide_goal(&b, &m, &r, GC_POLICY_MLG, &w, NULL, &d) == 0);
    CHECK_EQ_U64(d.level_hz, 216750000);
    CHECK(d.goal.max_slowdown_pct < 0 && d.goal.objective == GC_OBJECTIVE_ENERGY);
    CHECK(d.trade_s_pct > 0 && d.trade_vs_hz == 1300500000);
    CHECK(gc_decide(&b, &m, NULL, GC_POLICY_MLG, &w, &d) == 0);
    CHECK(d.trade_vs_hz == 0);
    fake_tree_remove(root);
}

static void test_goal_refusals_and_maxn(void)
{
    gc_roofline r;
    gc_board b;
    const char *root = roofline_board(&b, &r);
    double classes[1] = {0.0}; /* the tree's MAXN class */
    gc_tree_model m = {"test", fixed_score, 1, one_feature, 1, classes, {50, 50}, 522.75, "", "", "", "", 0, {0}, "", "", -1, 0, {0}, {0}, 0, 0};
    gc_workload w = {0, -1.0, 12, 768, 64, 0, 0, 0, 0, 0, 0, 0};
    gc_goal g = {GC_OBJECTIVE_ENERGY, 3.0};
    gc_decision d;

    CHECK(gc_decide_goal(&b, &m, &r, GC_POLICY_MLG, &w, &g, &d) == 0); /* MAXN stays MAXN */
    CHECK(d.level_hz == 0 && d.policy_level_hz == 0 && d.trade_vs_hz == 0);
    CHECK(gc_decide_goal(&b, &m, NULL, GC_POLICY_MAXN, &w, &g, &d) == 0); /* met trivially */
    CHECK(d.level_hz == 0);
    b.err[0] = 0;
    CHECK(gc_decide_goal(&b, &m, NULL, GC_POLICY_FFG, &w, &g, &d) == -EINVAL); /* no time curve */
    CHECK(strstr(b.err, "roofline.txt") != NULL && strstr(b.err, "pydvfs train") != NULL);
    g.objective = GC_OBJECTIVE_EDP;
    g.max_slowdown_pct = -1.0;
    CHECK(gc_decide_goal(&b, &m, &r, GC_POLICY_MLG, &w, &g, &d) == -EINVAL); /* one clock, no curve */
    CHECK(strstr(b.err, "edp") != NULL && strstr(b.err, "--policy roofline") != NULL &&
          strstr(b.err, "online") != NULL);
    CHECK(gc_decide_goal(&b, &m, &r, GC_POLICY_RULES, &w, &g, &d) == -EINVAL);
    CHECK(gc_decide_goal(&b, &m, NULL, GC_POLICY_MAXN, &w, &g, &d) == 0 && d.level_hz == 0);
    g.objective = GC_OBJECTIVE_COUNT;
    CHECK(gc_decide_goal(&b, &m, &r, GC_POLICY_ROOFLINE, &w, &g, &d) == -EINVAL);
    g.objective = GC_OBJECTIVE_ENERGY;
    g.max_slowdown_pct = NAN;
    CHECK(gc_decide_goal(&b, &m, &r, GC_POLICY_ROOFLINE, &w, &g, &d) == -EINVAL);
    g.max_slowdown_pct = INFINITY;
    CHECK(gc_decide_goal(&b, &m, &r, GC_POLICY_ROOFLINE, &w, &g, &d) == -EINVAL);
    fake_tree_remove(root);
}

/* The roofline policy's argmin of E t^k over the levels within the bound, by brute force. */
static int brute_argmin(const gc_board *b, const gc_roofline *r, const gc_workload *w, int k, double pct)
{
    double best = 0, cost, top_s = gc_roofline_time_s(r, w, level_mhz(b, b->n_freqs - 1));
    int i, best_i = -1;

    for (i = 0; i < b->n_freqs; i++) {
        double t = gc_roofline_time_s(r, w, level_mhz(b, i));

        if (pct >= 0 && t > top_s * (1.0 + pct / 100.0))
            continue;
        cost = gc_roofline_energy_j(r, w, level_mhz(b, i)) * pow(t, k);
        if (best_i < 0 || cost < best) {
            best = cost;
            best_i = i;
        }
    }
    return best_i;
}

static void test_roofline_objectives(void)
{
    gc_roofline r;
    gc_board b;
    const char *root = roofline_board(&b, &r);
    double classes[1] = {700.0};
    gc_tree_model m = {"test", fixed_score, 1, one_feature, 1, classes, {50, 50}, 700.0, "", "", "", "", 0, {0}, "", "", -1, 0, {0}, {0}, 0, 0};
    gc_workload ws[] = {{0, -1.0, 12, 768, 64, 0, 0, 0, 0, 0, 0, 0}, {0, -1.0, 2, 128, 20, 0, 0, 0, 0, 0, 0, 0}, {1, -1.0, 24, 1024, 128, 0, 0, 0, 0, 0, 0, 0}};
    double pcts[] = {-1.0, 0.0, 2.0, 10.0, 40.0};
    int k, i, p, differs = 0, e_level, want, want_free;
    gc_goal g;
    gc_decision d;

    for (i = 0; i < 3; i++) {
        CHECK(gc_decide(&b, &m, &r, GC_POLICY_ROOFLINE, &ws[i], &d) == 0);
        e_level = brute_argmin(&b, &r, &ws[i], 0, -1.0);
        CHECK_EQ_U64(d.level_hz, b.freqs_hz[e_level]);
        for (k = 0; k < GC_OBJECTIVE_COUNT; k++)
            for (p = 0; p < 5; p++) {
                g.objective = k;
                g.max_slowdown_pct = pcts[p];
                CHECK(gc_decide_goal(&b, &m, &r, GC_POLICY_ROOFLINE, &ws[i], &g, &d) == 0);
                want = brute_argmin(&b, &r, &ws[i], k, pcts[p]);
                want_free = brute_argmin(&b, &r, &ws[i], k, -1.0);
                CHECK_EQ_U64(d.level_hz, b.freqs_hz[want]);
                CHECK_EQ_U64(d.policy_level_hz, b.freqs_hz[want_free]);
                CHECK(d.proposed_mhz == level_mhz(&b, want_free));
                differs += k > 0 && pcts[p] < 0 && want != e_level;
            }
    }
    CHECK(differs > 0); /* E t prefers a faster clock than E where the curve says so */
    fake_tree_remove(root);
}

static void test_apply_goal_pins_the_raised_level(void)
{
    gc_roofline r;
    gc_board b;
    const char *root = roofline_board(&b, &r);
    double classes[1] = {114.75};
    gc_tree_model m = {"test", fixed_score, 1, one_feature, 1, classes, {50, 50}, 700.0, "", "", "", "", 0, {0}, "", "", -1, 0, {0}, {0}, 0, 0};
    gc_workload w = {0, -1.0, 12, 768, 64, 0, 0, 0, 0, 0, 0, 0};
    gc_goal g = {GC_OBJECTIVE_ENERGY, 10.0};
    char state_dir[600];
    gc_clock_state st;
    gc_decision d;
    int want = lowest_within(&b, &r, &w, 0, 10.0);

    snprintf(state_dir, sizeof state_dir, "%s/state", root);
    CHECK(want > 0 && want < b.n_freqs - 1);
    CHECK(gc_apply_goal(&b, &m, &r, GC_POLICY_MLG, &w, &g, state_dir, &d) == 0);
    CHECK(gc_clock_read(&b, &st) == 0);
    CHECK_EQ_U64(st.min_hz, b.freqs_hz[want]);
    CHECK_EQ_U64(st.max_hz, b.freqs_hz[want]);
    fake_tree_remove(root);
}

/* A tree names the table it was trained on; on a board with another top level its clock is
 * mapped by the fraction of the top level and snapped; tops over 2x apart: declined. */
static void test_foreign_table_mapped_or_declined(void)
{
    static const double classes[] = {714.0};
    const char *nano = fake_tree_make(FAKE_JP6, "306000000 408000000 510000000 612000000 714000000 "
                                                "816000000 918000000 1020000000");
    gc_tree_model m = {"test", fixed_score, 1, one_feature, 1, classes, {50, 50}, 714.0, "", "", "",
                       "agx-orin", 11, {306, 408, 510, 612, 714, 816, 918, 1020, 1122, 1224, 1300.5},
                       "", "", -1, 0, {0}, {0}, 0, 0};
    gc_workload w = {0, 50.0, 12, 768, 64, 0, 0, 0, 0, 0, 0, 0};
    gc_decision d;
    gc_board b;
    double mhz;
    int mapped, policy;

    CHECK(gc_board_open(&b, nano) == 0);
    for (policy = 0; policy < 3; policy++) { /* mlg, ffg, rules: clocks of the training table */
        CHECK(gc_decide(&b, &m, NULL, policy, &w, &d) == 0);
        CHECK(d.mapped_from_mhz > 0);
        CHECK(fabs(d.proposed_mhz - d.mapped_from_mhz * 1020.0 / 1300.5) < 1e-9);
        CHECK(d.level_hz >= 306000000 && d.level_hz <= 1020000000 && d.level_hz % 102000000 == 0);
    }
    CHECK(gc_decide(&b, &m, NULL, GC_POLICY_FFG, &w, &d) == 0);
    CHECK_EQ_U64(d.level_hz, 510000000); /* 714 x 1020/1300.5 = 560 -> 510 (the nearer) */
    /* the same top level: as it is */
    m.levels_mhz[10] = 1020.0;
    mhz = 714.0;
    CHECK(gc_map_to_board(&m, &b, &mhz, &mapped, b.err, sizeof b.err) == 0 && !mapped && mhz == 714.0);
    /* an unknown table: as it is */
    m.n_levels = 0;
    CHECK(gc_map_to_board(&m, &b, &mhz, &mapped, b.err, sizeof b.err) == 0 && !mapped);
    /* tops more than 2x apart: declined, pointing to the online search */
    m.n_levels = 11;
    m.levels_mhz[10] = 2100.0;
    CHECK(gc_decide(&b, &m, NULL, GC_POLICY_MLG, &w, &d) == -EINVAL);
    CHECK(strstr(b.err, "pydvfs run --policy online") != NULL);
    CHECK(gc_decide(&b, &m, NULL, GC_POLICY_MAXN, &w, &d) == 0 && d.level_hz == 0);
    fake_tree_remove(nano);
}

/* A tree pins only where its training data expects a clearly positive saving against MAXN
 * (GC_SAVING_MARGIN_SD spreads); else the board is left to its own governor: nothing pinned,
 * and the reason in one line. */
static void test_expected_saving_gate(void)
{
    const char *root = fake_tree_make(FAKE_JP5, ORIN_11_LEVELS);
    char state_dir[600], why[GC_ERR_MAX];
    double classes[1] = {714.0};
    gc_tree_model m = {"test", fixed_score, 1, one_feature, 1, classes, {50, 50}, 612.0, "", "", "", "", 0, {0}, "", "", -1, 0, {0}, {0}, 0, 0};
    gc_workload w = {0, 60.0, 12, 768, 64, 0, 0, 0, 0, 0, 0, 0};
    gc_clock_state st;
    gc_decision d;
    gc_board b;

    snprintf(state_dir, sizeof state_dir, "%s/state", root);
    CHECK(gc_board_open(&b, root) == 0);
    CHECK(gc_decide(&b, &m, NULL, GC_POLICY_MLG, &w, &d) == 0); /* no savings known: no gate */
    CHECK(!d.has_expectation && !d.kept_maxn && d.level_hz == 714000000);
    m.has_savings = 1;
    m.class_saving_pct[0] = 10.0;
    m.class_spread_pct[0] = 4.0;
    m.ffg_saving_pct = 1.0;
    m.ffg_spread_pct = 2.0;
    CHECK(gc_decide(&b, &m, NULL, GC_POLICY_MLG, &w, &d) == 0);
    CHECK(d.has_expectation && d.expected_saving_pct == 10.0 && d.saving_spread_pct == 4.0);
    CHECK(!d.kept_maxn && d.level_hz == 714000000);
    gc_kept_reason(&d, why, sizeof why);
    CHECK(why[0] == '\0');
    m.class_spread_pct[0] = 10.0; /* 10 - 1 x 10 is not > 0 */
    CHECK(gc_apply(&b, &m, NULL, GC_POLICY_MLG, &w, state_dir, &d) == 0);
    CHECK(d.kept_maxn && d.level_hz == 0 && d.kept_from_hz == 714000000);
    CHECK(gc_clock_read(&b, &st) == 0); /* nothing pinned */
    CHECK_EQ_U64(st.min_hz, 306000000);
    CHECK_EQ_U64(st.max_hz, 1300500000);
    gc_kept_reason(&d, why, sizeof why);
    CHECK(strstr(why, "left the board to its own governor") && strstr(why, "714 MHz"));
    /* every kept reason says the way to the saving, whole in the front ends' GC_ERR_MAX buffers */
    {
        gc_decision k = d;
        int kind;

        k.util_pct = 100.0 / 3.0; /* the longest numbers %g writes */
        k.trained_util_min_pct = 100.0 / 7.0;
        k.kept_from_hz = 1300500000;
        for (kind = GC_KEPT_NOT_CLEAR; kind <= GC_KEPT_NO_SAFE_CLOCK; kind++) {
            k.kept_maxn = kind;
            gc_kept_reason(&k, why, sizeof why);
            CHECK(strlen(why) < sizeof why - 1);
            CHECK(strstr(why, "one governed run (`pydvfs run --policy online -- CMD`") && strstr(why, "`pydvfs calibrate` (about a minute)"));
            CHECK(strstr(why, "for every workload") == why + strlen(why) - strlen("for every workload"));
        }
        k.kept_maxn = GC_KEPT_NO_SAFE_CLOCK;
        gc_kept_reason(&k, why, sizeof why);
        CHECK(strstr(why, "kept MAXN for lack of knowledge") == why);
    }
    /* ffg reads no workload and has its own expectation */
    CHECK(gc_decide(&b, &m, NULL, GC_POLICY_FFG, NULL, &d) == 0);
    CHECK(d.kept_maxn && d.kept_from_hz == 612000000 && d.expected_saving_pct == 1.0);
    m.ffg_saving_pct = 5.0;
    CHECK(gc_decide(&b, &m, NULL, GC_POLICY_FFG, NULL, &d) == 0 && d.level_hz == 612000000);
    CHECK(gc_decide(&b, &m, NULL, GC_POLICY_MLG, NULL, &d) == -EINVAL && strstr(b.err, "needs a workload"));
    fake_tree_remove(root);
}

/* One built-in policy per board and measure, each naming where it comes from; a board the table
 * does not know gets the fallback board's, an unknown measure none. */
static void test_builtin_policies(void)
{
    const char *mm;
    int i, k;

    CHECK(gc_n_builtin_policies >= 2);
    CHECK(gc_measure_parse("module", &mm) == 0 && strcmp(mm, gc_energy_measures[0]) == 0);
    CHECK(gc_measure_parse("watts", &mm) == -EINVAL);
    for (i = 0; i < gc_n_builtin_policies; i++) {
        const gc_builtin_policy *p = &gc_builtin_policies[i];
        const gc_tree_model *t = gc_builtin_for(p->board_id, p->measure);

        CHECK(t == p->tree);
        CHECK(strcmp(t->board_id, p->board_id) == 0 && strcmp(t->measure, p->measure) == 0);
        CHECK(strcmp(t->origin, GC_ORIGIN_BUILTIN) == 0 && t->has_savings && t->n_levels > 0);
        CHECK(t->calibrated == 0 || t->calibrated == 1);
        for (k = 0; k < t->n_classes; k++)
            CHECK(t->class_spread_pct[k] >= 0.0);
    }
    for (k = 0; gc_energy_measures[k]; k++) {
        const gc_tree_model *t = gc_builtin_for("no-such-board", gc_energy_measures[k]);

        CHECK(t && strcmp(t->board_id, gc_builtin_fallback_board) == 0);
        CHECK(gc_builtin_for("", gc_energy_measures[k]) == t);
    }
    CHECK(gc_builtin_for(gc_builtin_fallback_board, NULL) == gc_builtin_for(gc_builtin_fallback_board, "module"));
    CHECK(gc_builtin_for(gc_builtin_fallback_board, "watts") == NULL);
}

int main(void)
{
    RUN(test_rules);
    RUN(test_model_family);
    RUN(test_method_keys);
    RUN(test_workload_grammar);
    RUN(test_policy_names);
    RUN(test_policy_table);
    RUN(test_decide_clamps_to_table);
    RUN(test_features_match_sklearn_float32);
    RUN(test_builtin_tree_is_usable);
    RUN(test_apply_then_maxn_restores);
    RUN(test_roofline_load_is_strict);
    RUN(test_roofline_policy_on_13_levels);
    RUN(test_objective_names);
    RUN(test_roofline_time_is_a_over_f_plus_b);
    RUN(test_slowdown_bound_raises_a_policy_level);
    RUN(test_goal_refusals_and_maxn);
    RUN(test_roofline_objectives);
    RUN(test_apply_goal_pins_the_raised_level);
    RUN(test_foreign_table_mapped_or_declined);
    RUN(test_expected_saving_gate);
    RUN(test_builtin_policies);
    return DONE("test_policy");
}
