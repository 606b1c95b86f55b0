# sdcMicro 5.8.1 reference figures for SUDA2 beyond free1: random survey-like tables with
# missing key values, other DisFractions, 2 to 10 keys, text keys (sdcMicro 5.8.1 stops with
# "colSums(contribs): x must be an array" for a single key, so none here).  Only CALLS sdcMicro.
#   R_LIBS=<library with sdcMicro 5.8.1> Rscript scripts/make_suda2_reference.R resources/suda2_reference
# Writes, per case, <case>.csv (the data: key columns, then suda_score and suda_dis from
# sdcMicro's suda2(createSdcObj(...), missing = NA, DisFraction = ...)) and cases.json.
suppressMessages(library(sdcMicro)); library(jsonlite)
out <- commandArgs(trailingOnly = TRUE)[1]
stopifnot(packageVersion("sdcMicro") == "5.8.1")
make <- function(n, cards, na_share, seed, text = FALSE) {
  set.seed(seed)
  d <- as.data.frame(lapply(seq_along(cards), function(j) {
    p <- rev(seq_len(cards[j]))^1.3; x <- sample.int(cards[j], n, replace = TRUE, prob = p)
    x[runif(n) < na_share] <- NA
    if (text) x <- ifelse(is.na(x), NA, paste0("c", sprintf("%02d", x)))
    x
  }))
  names(d) <- paste0("K", seq_along(cards))
  d
}
cases <- list(
  list(name = "k8_na5_f005", n = 2000, cards = c(2, 12, 5, 8, 4, 4, 3, 10), na = 0.05, f = 0.05, seed = 1),
  list(name = "k4_na10_f03", n = 600, cards = c(3, 6, 4, 5), na = 0.10, f = 0.3, seed = 2),
  list(name = "k2_f001", n = 300, cards = c(7, 9), na = 0.02, f = 0.01, seed = 3),
  list(name = "k10_na2_f001", n = 3000, cards = c(2, 9, 6, 7, 5, 4, 3, 8, 5, 6), na = 0.02, f = 0.01, seed = 5),
  list(name = "k5_text_f002", n = 800, cards = c(4, 11, 6, 3, 9), na = 0.03, f = 0.02, seed = 6, text = TRUE),
  list(name = "k6_tiny_f09", n = 12, cards = c(2, 3, 2, 2, 3, 2), na = 0.15, f = 0.9, seed = 7)
)
meta <- list()
for (cs in cases) {
  d <- make(cs$n, cs$cards, cs$na, cs$seed, isTRUE(cs$text))
  keys <- names(d)
  obj <- suppressWarnings(createSdcObj(d, keyVars = keys))
  obj <- suppressWarnings(suda2(obj, missing = NA, DisFraction = cs$f))
  s <- get.sdcMicroObj(obj, "risk")$suda2
  d$suda_score <- s$score; d$suda_dis <- s$disScore
  write.csv(d, file.path(out, paste0(cs$name, ".csv")), row.names = FALSE, na = "")
  meta[[cs$name]] <- list(keys = keys, dis_fraction = cs$f, n = cs$n, score_sum = sum(s$score),
                          dis_sum = sum(s$disScore))
}
writeLines(toJSON(meta, auto_unbox = TRUE, pretty = TRUE, digits = NA), file.path(out, "cases.json"))
