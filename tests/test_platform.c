/* SPDX-License-Identifier: MIT */
/* The platform layers (core/platform.h, and support/support.h for the programs' services) with
 * UTF-8 names outside any ANSI code page: directories, files replaced in one step, listing, the
 * environment, a child process with awkward arguments, temporary directories removed with their
 * contents, and memory mappings. On Windows these go through the wide-character calls; a narrow
 * call there would turn the names into '?'. */
#include "test_common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* "posenc-été-日本": Latin-1 and CJK, so no single-byte code page holds it. */
#define NAME "posenc-\xc3\xa9t\xc3\xa9-\xe6\x97\xa5\xe6\x9c\xac"
#define VARIABLE "POSENC_TEST_PLATFORM_VALUE"
#define VALUE "C:\\caf\xc3\xa9\\\xe6\x97\xa5\xe6\x9c\xac dir"

/* Arguments a command line must quote or escape: blanks, quotes, backslashes before a quote
 * and at the end, an empty one, UTF-8. */
static const char *const child_arguments[] = {
    "two words", "quote\"inside", "back\\slash\\\"quote", "trailing\\", "", NAME,
};
#define CHILD_ARGUMENTS (sizeof child_arguments / sizeof child_arguments[0])
#define CHILD_OK 42

/* The child: exits CHILD_OK when it got every argument and the variable as they were sent. */
static int child_main(int argc, char **argv)
{
    if (argc != 2 + (int)CHILD_ARGUMENTS) {
        fprintf(stderr, "child: %d arguments\n", argc);
        return 1;
    }
    for (size_t i = 0; i < CHILD_ARGUMENTS; i++) {
        if (strcmp(argv[2 + i], child_arguments[i]) != 0) {
            fprintf(stderr, "child: argument %zu is [%s], expected [%s]\n", i, argv[2 + i],
                    child_arguments[i]);
            return 1;
        }
    }
    char value[256];
    if (!posenc__env_get_path(VARIABLE, value, sizeof value) || strcmp(value, VALUE) != 0) {
        fprintf(stderr, "child: %s not inherited\n", VARIABLE);
        return 1;
    }
    return CHILD_OK;
}

static void join(char *out, size_t size, const char *a, const char *b)
{
    int n = snprintf(out, size, "%s/%s", a, b);
    CHECK(n > 0 && (size_t)n < size);
}

static bool read_text(const char *path, char *out, size_t size)
{
    FILE *file = posenc__file_open(path, "rb");
    if (!file)
        return false;
    size_t n = fread(out, 1, size - 1, file);
    out[n] = '\0';
    fclose(file);
    return true;
}

static bool write_text(FILE *file, const char *text)
{
    return file && fwrite(text, 1, strlen(text), file) == strlen(text);
}

typedef struct listing {
    unsigned entries;
    unsigned matching;
    const char *expected;
} listing;

static void count_listed(const char *name, void *user)
{
    listing *l = user;
    l->entries++;
    if (strcmp(name, l->expected) == 0)
        l->matching++;
}

static void test_files(const char *root)
{
    char dir[1024], destination[1024], temporary[1200], other[1200], text[64];
    join(dir, sizeof dir, root, NAME);
    CHECK(!support_is_directory(dir));
    CHECK(posenc__make_directory(dir));
    CHECK(support_is_directory(dir));
    errno = 0;
    CHECK(!posenc__make_directory(dir) && errno == EEXIST);

    join(destination, sizeof destination, dir, NAME ".bin");
    FILE *old = posenc__file_open(destination, "wb");
    CHECK(write_text(old, "old contents"));
    if (old)
        fclose(old);
    CHECK(read_text(destination, text, sizeof text) && strcmp(text, "old contents") == 0);
    CHECK(!support_is_directory(destination));

    /* A temporary file beside the destination, committed and renamed over it. */
    FILE *file = posenc__temp_file_create(destination, temporary, sizeof temporary);
    CHECK(file != NULL);
    CHECK(strncmp(temporary, destination, strlen(destination)) == 0);
    CHECK(write_text(file, "new contents"));
    if (file)
        CHECK(posenc__file_commit(file));
    /* A second one never shares the first one's name. */
    FILE *second = posenc__temp_file_create(destination, other, sizeof other);
    CHECK(second != NULL && strcmp(other, temporary) != 0);
    if (second)
        fclose(second);
    CHECK(posenc__file_remove(other));
    CHECK(posenc__file_open(other, "rb") == NULL);

    CHECK(posenc__file_replace(temporary, destination));
    CHECK(read_text(destination, text, sizeof text) && strcmp(text, "new contents") == 0);
    CHECK(posenc__file_open(temporary, "rb") == NULL);
    errno = 0;
    CHECK(!posenc__file_replace(temporary, destination) && errno == ENOENT);

    /* The listing gives the name back in UTF-8, and only it. */
    listing l = {.expected = NAME ".bin"};
    CHECK(support_directory_list(dir, count_listed, &l));
    CHECK(l.entries == 1 && l.matching == 1);
    int64_t modified = 0;
    CHECK(support_file_modified(destination, &modified) && modified > 0);
    CHECK(!support_file_modified(temporary, &modified));

    /* Something to remove below the directory: a subdirectory with a file. */
    char nested[1200], nested_file[1300];
    join(nested, sizeof nested, dir, "nested");
    CHECK(posenc__make_directory(nested));
    join(nested_file, sizeof nested_file, nested, NAME);
    FILE *inner = posenc__file_open(nested_file, "wb");
    CHECK(write_text(inner, "x"));
    if (inner)
        fclose(inner);
    printf("  files and directories named %s: ok\n", NAME);
}

static void test_environment(void)
{
    char value[256];
    CHECK(support_env_unset(VARIABLE));
    CHECK(posenc__env_get(VARIABLE) == NULL);
    CHECK(!posenc__env_get_path(VARIABLE, value, sizeof value));

    CHECK(support_env_set(VARIABLE, VALUE));
    CHECK(posenc__env_get(VARIABLE) != NULL); /* in the ANSI code page on Windows */
    CHECK(posenc__env_get_path(VARIABLE, value, sizeof value) && strcmp(value, VALUE) == 0);
    CHECK(!posenc__env_get_path(VARIABLE, value, 4)); /* too long for the space given */
    CHECK(support_env_set(VARIABLE, "plain"));
    CHECK(posenc__env_get(VARIABLE) && strcmp(posenc__env_get(VARIABLE), "plain") == 0);

    CHECK(support_env_unset(VARIABLE));
    CHECK(posenc__env_get(VARIABLE) == NULL);
    CHECK(!posenc__env_get_path(VARIABLE, value, sizeof value));

    /* The kernel caches' default folder, read as UTF-8. */
#if defined(_WIN32)
    const char *cache_variable = "LOCALAPPDATA", *cache_value = VALUE;
#else
    const char *cache_variable = "XDG_CACHE_HOME", *cache_value = "/tmp/" NAME;
#endif
    char saved[1024];
    bool was_set = posenc__env_get_path(cache_variable, saved, sizeof saved);
    CHECK(support_env_set(cache_variable, cache_value));
    CHECK(posenc__user_cache_directory(value, sizeof value) && strcmp(value, cache_value) == 0);
    if (was_set)
        support_env_set(cache_variable, saved);
    else
        support_env_unset(cache_variable);
    printf("  environment: ok\n");
}

static void test_child(const char *self)
{
    CHECK(support_env_set(VARIABLE, VALUE));
    /* A Linux cross build runs under qemu-user, which does not follow into a child: the test
     * then gets the emulator's command (comma-separated) to start its child with. */
    enum { LAUNCHER_WORDS = 8 };
    char launcher[1024] = "";
    const char *given = posenc__env_get("POSENC_TEST_CHILD_LAUNCHER");
    posenc__copy_string(launcher, sizeof launcher, given ? given : "");
    const char *argv[LAUNCHER_WORDS + 2 + CHILD_ARGUMENTS + 1] = {0};
    size_t words = 0;
    for (char *word = launcher; *word && words < LAUNCHER_WORDS;) {
        argv[words++] = word;
        char *comma = strchr(word, ',');
        if (!comma)
            break;
        *comma = '\0';
        word = comma + 1;
    }
    size_t program = words;
    argv[words++] = self;
    argv[words++] = "--child";
    for (size_t i = 0; i < CHILD_ARGUMENTS; i++)
        argv[words++] = child_arguments[i];
    support_process child;
    CHECK(support_process_start(&child, argv));
    CHECK(support_process_wait(&child) == CHILD_OK);

    /* A program that is not there is not started. */
    char missing[1100];
    snprintf(missing, sizeof missing, "%s-missing", self);
    argv[program] = missing;
    support_process absent;
    bool started = support_process_start(&absent, argv);
    /* posix_spawn may report the failure only through the child's exit status (127). */
    CHECK(!started || support_process_wait(&absent) != CHILD_OK);
    CHECK(support_env_unset(VARIABLE));
    printf("  child process: ok\n");
}

static void test_memory_mapping(void)
{
    size_t bytes = (size_t)64 << 20;
    unsigned char *memory = support_memory_map(bytes);
    CHECK(memory != NULL);
    if (!memory)
        return;
    CHECK(memory[0] == 0 && memory[bytes - 1] == 0); /* zeroed */
    memory[0] = 1;
    memory[bytes - 1] = 2;
    CHECK(memory[0] == 1 && memory[bytes - 1] == 2);
    support_memory_unmap(memory, bytes);
    printf("  memory mapping: ok\n");
}

int main(int argc, char **argv)
{
    argv = support_utf8_arguments(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "--child") == 0)
        return child_main(argc, argv);

    printf("process %llu\n", (unsigned long long)posenc__process_id());
    CHECK(posenc__process_id() != 0);

    char root[1024];
    CHECK(support_temp_directory_create(NAME, root, sizeof root));
    CHECK(support_is_directory(root));
    char second[1024];
    CHECK(support_temp_directory_create(NAME, second, sizeof second));
    CHECK(strcmp(root, second) != 0 && support_is_directory(second));
    support_remove_tree(second);
    CHECK(!support_is_directory(second));

    test_files(root);
    support_remove_tree(root);
    CHECK(!support_is_directory(root));
    printf("  temporary directory %s and its contents removed\n", root);

    test_environment();
    test_child(argv[0]);
    test_memory_mapping();

    uint64_t l1d, l2, l3;
    support_cpu_caches(&l1d, &l2, &l3);
    printf("  caches: L1d %llu, L2 %llu, L3 %llu bytes\n", (unsigned long long)l1d,
           (unsigned long long)l2, (unsigned long long)l3);
    /* Sizes the OS does tell grow with the level. */
    CHECK(!l1d || !l2 || l1d <= l2);
    return test_finish("test_platform");
}
