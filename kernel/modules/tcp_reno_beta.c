// SPDX-License-Identifier: GPL-2.0
/*
 * TCP Reno with a tunable multiplicative-decrease factor ("reno_beta").
 *
 * Window growth is standard Reno as specified in RFC 5681 (M. Allman,
 * V. Paxson, E. Blanton, "TCP Congestion Control", 2009): slow start while
 * cwnd < ssthresh, then congestion avoidance adding one segment per RTT,
 * and only while the connection is actually limited by cwnd.
 *
 * On a congestion event RFC 5681 halves the window. Following the
 * sensitivity analysis in P. K. Saminathan, V. Raja, A. Prabhakar,
 * "Improved TCP congestion control algorithms for HTTP/2" (Stony Brook
 * University), the reduction factor is a parameter instead:
 *
 *	ssthresh = max(cwnd * beta, 2)		0.1 <= beta <= 0.9
 *
 * beta = 0.5 is plain Reno. The paper varies its "reduction factor" from
 * 0.5 to 0.9 without saying whether it is beta or the depth of the cut
 * (1 - beta); 0.1..0.9 holds both readings (beta 0.5..0.9 and 0.5..0.1).
 * The floor of 2 segments (RFC 5681, eq. 4) keeps the smallest beta from
 * cutting a small window to nothing. The parameter is written as a decimal
 * (beta=0.8) and stored in thousandths; every connection copies it in
 * .init, so a change through /sys/module/tcp_reno_beta/parameters/beta
 * only affects connections opened afterwards.
 *
 * Written for Tortoise Lab from the RFC and the paper.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/ctype.h>
#include <linux/string.h>
#include <net/tcp.h>

#define RENOBETA_MILLI		1000U	/* parameter scale: thousandths */
#define RENOBETA_MIN_CWND	2U	/* RFC 5681: ssthresh >= 2 segments */

/* A bounded decimal module parameter, stored in thousandths. */
struct renobeta_milli_param {
	unsigned int val;
	unsigned int min;
	unsigned int max;
};

static struct renobeta_milli_param renobeta_beta = {
	.val = 500, .min = 100, .max = 900,
};

/* Per-connection state, lives in inet_csk(sk)->icsk_ca_priv. */
struct renobeta {
	u32 beta;	/* reduction factor in thousandths, snapshot at init */
	u32 prior_cwnd;	/* cwnd just before the last reduction, for undo */
};

/*
 * Parse "D[.F]" with 1..6 integer digits and 1..3 fractional digits
 * (an optional trailing newline, as written by echo, is accepted) into
 * thousandths: "0.8" -> 800, "0.95" -> 950, "1" -> 1000.
 */
static int renobeta_parse_milli(const char *s, size_t len, unsigned int *out)
{
	unsigned int ipart = 0, fpart = 0, idig = 0, fdig = 0;
	const char *end = s + len;

	while (s < end && isdigit(*s)) {
		if (++idig > 6)
			return -EINVAL;
		ipart = ipart * 10 + (*s++ - '0');
	}
	if (!idig)
		return -EINVAL;
	if (s < end) {
		if (*s++ != '.')
			return -EINVAL;
		while (s < end && isdigit(*s)) {
			if (++fdig > 3)
				return -EINVAL;
			fpart = fpart * 10 + (*s++ - '0');
		}
		if (!fdig || s != end)
			return -EINVAL;
	}
	for (; fdig < 3; fdig++)
		fpart *= 10;
	*out = ipart * RENOBETA_MILLI + fpart;
	return 0;
}

static int renobeta_milli_set(const char *val, const struct kernel_param *kp)
{
	struct renobeta_milli_param *p = kp->arg;
	size_t len = strlen(val);
	unsigned int v;

	if (len && val[len - 1] == '\n')
		len--;
	if (renobeta_parse_milli(val, len, &v) || v < p->min || v > p->max) {
		pr_err("invalid %s '%.*s': must be a decimal from %u.%03u to %u.%03u with at most 3 fractional digits\n",
		       kp->name, (int)len, val,
		       p->min / RENOBETA_MILLI, p->min % RENOBETA_MILLI,
		       p->max / RENOBETA_MILLI, p->max % RENOBETA_MILLI);
		return -EINVAL;
	}
	WRITE_ONCE(p->val, v);
	return 0;
}

static int renobeta_milli_get(char *buffer, const struct kernel_param *kp)
{
	const struct renobeta_milli_param *p = kp->arg;
	unsigned int v = READ_ONCE(p->val);

	return scnprintf(buffer, PAGE_SIZE, "%u.%03u\n",
			 v / RENOBETA_MILLI, v % RENOBETA_MILLI);
}

static const struct kernel_param_ops renobeta_milli_ops = {
	.set = renobeta_milli_set,
	.get = renobeta_milli_get,
};

module_param_cb(beta, &renobeta_milli_ops, &renobeta_beta, 0644);
MODULE_PARM_DESC(beta, "multiplicative decrease factor on loss, 0.1-0.9 (default 0.5 = Reno)");

static void renobeta_init(struct sock *sk)
{
	struct renobeta *ca = inet_csk_ca(sk);

	ca->beta = READ_ONCE(renobeta_beta.val);
	ca->prior_cwnd = 0;
}

/* Congestion event (fast retransmit, ECN or RTO): new slow start threshold. */
static u32 renobeta_ssthresh(struct sock *sk)
{
	struct renobeta *ca = inet_csk_ca(sk);
	u32 cwnd = tcp_snd_cwnd(tcp_sk(sk));
	u64 reduced = div_u64((u64)cwnd * ca->beta, RENOBETA_MILLI);

	ca->prior_cwnd = cwnd;
	return (u32)max_t(u64, reduced, RENOBETA_MIN_CWND);
}

/* The reduction was spurious: go back to the window from before it. */
static u32 renobeta_undo_cwnd(struct sock *sk)
{
	struct renobeta *ca = inet_csk_ca(sk);

	return max(tcp_snd_cwnd(tcp_sk(sk)), ca->prior_cwnd);
}

static void renobeta_cong_avoid(struct sock *sk, u32 ack, u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);

	if (!tcp_is_cwnd_limited(sk))
		return;

	/* RFC 5681 3.1: slow start below ssthresh ... */
	if (tcp_in_slow_start(tp)) {
		acked = tcp_slow_start(tp, acked);
		if (!acked)
			return;
	}
	/* ... then about one segment per window of ACKed data. */
	tcp_cong_avoid_ai(tp, tcp_snd_cwnd(tp), acked);
}

static struct tcp_congestion_ops renobeta_ops __read_mostly = {
	.init		= renobeta_init,
	.ssthresh	= renobeta_ssthresh,
	.undo_cwnd	= renobeta_undo_cwnd,
	.cong_avoid	= renobeta_cong_avoid,
	.owner		= THIS_MODULE,
	.name		= "reno_beta",
};

static int __init renobeta_register(void)
{
	BUILD_BUG_ON(sizeof(struct renobeta) > ICSK_CA_PRIV_SIZE);
	return tcp_register_congestion_control(&renobeta_ops);
}

static void __exit renobeta_unregister(void)
{
	tcp_unregister_congestion_control(&renobeta_ops);
}

module_init(renobeta_register);
module_exit(renobeta_unregister);

MODULE_AUTHOR("Tortoise Lab");
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("TCP Reno (RFC 5681) with a tunable multiplicative decrease factor");
