# sdcMicro 5.8.1 reference figures for the survey-toolbox METHODS of issue 23 (recode,
# top-bottom-coding, pram) on free1, and sdcMicro's `testdata` (households) as a CSV.
# Calls only: nothing here builds or changes sdcMicro.
#   R_LIBS=<sdcMicro library> Rscript scripts/make_methods_reference.R     (from the repository root)
# Writes resources/free1/free1_methods_reference.json and resources/testdata/testdata.csv.
suppressMessages(library(sdcMicro)); library(jsonlite)
data(free1); d <- as.data.frame(free1)
counts <- function(f) { t <- table(f, useNA = "ifany"); as.list(setNames(as.integer(t), names(t))) }
# -- globalRecode: breaks by number (equidistant over the data, equalAmount = quantiles)
eq_age <- globalRecode(d$AGE, breaks = 5)                       # method "equidistant"
qa_age <- globalRecode(d$AGE, breaks = 4, method = "equalAmount")
qa_inc <- globalRecode(d$INCOME, breaks = 5, method = "equalAmount")
# -- topBotCoding
q95 <- quantile(d$INCOME, 0.95, names = FALSE); q05 <- quantile(d$INCOME, 0.05, names = FALSE)
top_r <- topBotCoding(d$INCOME, value = 900000, replacement = 950000, kind = "top")
bot <- topBotCoding(d$INCOME, value = q05, replacement = q05, kind = "bottom")
top_age <- topBotCoding(d$AGE, value = 65, replacement = 65, kind = "top")
# -- pram: the matrix is built from pd (diagonal drawn uniformly in [pd, 1]) and the category
#    frequencies BEFORE any draw, so the first runif() after set.seed() gives its diagonal
pram_case <- function(v, pd, alpha, seed) {
  x <- data.frame(factor(d[[v]])); names(x) <- v
  L <- nlevels(x[[v]])
  set.seed(seed); pds <- runif(L, min = pd, max = 1)
  set.seed(seed); r <- pram(x, variables = v, pd = pd, alpha = alpha)
  Rs <- attr(r, "pram_params")[[v]]$Rs
  list(variable = v, pd = pd, alpha = alpha, seed = seed, levels = levels(x[[v]]),
       # as text with 17 significant digits: the exact doubles (JSON numbers would keep 15)
       diagonal_draws = sprintf("%.17g", pds),
       matrix = lapply(unname(split(Rs, row(Rs))), function(r) sprintf("%.17g", r)),
       original = counts(x[[v]]), released = counts(r[[paste0(v, "_pram")]]))
}
pcases <- list(pram_case("MARSTAT", 0.8, 0.5, 1), pram_case("EDUC1", 0.6, 1, 7),
               pram_case("KINDPERS", 0.9, 0.3, 11))
# the draws: mean released frequencies over 300 runs (invariant PRAM keeps them in expectation)
reps <- 300
x <- data.frame(MARSTAT = factor(d$MARSTAT))
freq <- t(sapply(seq_len(reps), function(s) { set.seed(1000 + s)
  as.integer(table(pram(x, variables = "MARSTAT", pd = 0.8, alpha = 0.5)$MARSTAT_pram)) }))
# a user matrix (no invariance): sdcMicro applies it as given
M <- matrix(c(0.7, 0.1, 0.1, 0.1,  0.1, 0.7, 0.1, 0.1,  0.1, 0.1, 0.7, 0.1,  0.1, 0.1, 0.1, 0.7),
            nrow = 4, byrow = TRUE, dimnames = list(levels(x$MARSTAT), levels(x$MARSTAT)))
freqM <- t(sapply(seq_len(reps), function(s) { set.seed(5000 + s)
  as.integer(table(pram(x, variables = "MARSTAT", pd = M)$MARSTAT_pram)) }))
res <- list(
  n = nrow(d),
  recode_age_equidistant5 = list(counts = counts(eq_age)),
  # breaks as text with 17 significant digits: the exact doubles (a type-7 quantile of INCOME
  # is 460080.00000000006, which JSON's 15 digits would print as 460080)
  recode_age_quantile4 = list(breaks = sprintf("%.17g", quantile(d$AGE, c(0, 1:4 / 4))), counts = counts(qa_age)),
  recode_income_quantile5 = list(breaks = sprintf("%.17g", quantile(d$INCOME, c(0, 1:5 / 5))), counts = counts(qa_inc)),
  top_income_900000_to_950000 = list(n_changed = sum(d$INCOME > 900000), sum_after = sum(top_r)),
  bottom_income_q05 = list(value = sprintf("%.17g", q05), n_changed = sum(d$INCOME < q05), sum_after = sum(bot)),
  top_age_65 = list(n_changed = sum(d$AGE > 65), sum_after = sum(top_age)),
  pram = pcases,
  pram_marstat_reps = list(runs = reps, pd = 0.8, alpha = 0.5, levels = levels(x$MARSTAT),
                           original = as.integer(table(x$MARSTAT)),
                           mean = colMeans(freq), sd = apply(freq, 2, sd)),
  pram_marstat_user_matrix = list(runs = reps, matrix = unname(split(M, row(M))),
                                  mean = colMeans(freqM), sd = apply(freqM, 2, sd)))
writeLines(toJSON(res, auto_unbox = TRUE, pretty = TRUE, digits = NA),
           "resources/free1/free1_methods_reference.json")
data(testdata)
write.csv(testdata, "resources/testdata/testdata.csv", row.names = FALSE)
cat("done\n")
