// SPDX-License-Identifier: GPL-2.0
/*
 * CUBIC+ ("cubic_plus"): CUBIC with a gentler back-off and an optional
 * RTT-aware recovery time.
 *
 * Base algorithm: RFC 9438 (L. Xu, S. Ha, I. Rhee, V. Goel, L. Eggert,
 * "CUBIC for Fast and Long-Distance Networks", 2023), also S. Ha, I. Rhee,
 * L. Xu, "CUBIC: A New TCP-Friendly High-Speed TCP Variant", ACM SIGOPS
 * OSR 42(5), 2008. With C = 0.4 and t the time since the start of the
 * current congestion avoidance epoch:
 *
 *	W_cubic(t) = C * (t - K)^3 + W_max			(RFC 9438 4.2)
 *	K = cbrt((W_max - cwnd_epoch) / C)
 *	target = clamp(W_cubic(t + RTT), cwnd, 1.5 * cwnd)
 *	cwnd += (target - cwnd) / cwnd per ACKed segment
 *	W_est += alpha * acked / cwnd, alpha = 3(1 - b)/(1 + b),
 *	  alpha = 1 once W_est >= cwnd_prior			(RFC 9438 4.3)
 *	cwnd = W_est while W_cubic(t) < W_est (Reno-friendly region)
 *	fast convergence: W_max = cwnd * (1 + b)/2 if cwnd < W_max  (4.7)
 *	after an RTO the next epoch uses K = 0, W_max = cwnd_epoch  (4.8)
 *	idle periods are not counted in t (application-limited flows)
 *
 * Changes from P. K. Saminathan, V. Raja, A. Prabhakar, "Improved TCP
 * congestion control algorithms for HTTP/2" (Stony Brook University):
 *
 * 1. A gentler multiplicative decrease, b = beta' = 1 - (1 - beta)/n
 *    (beta = 0.7, n = 6 gives 0.95; n = 1 is plain CUBIC). beta' is used
 *    everywhere RFC 9438 uses beta_cubic: ssthresh = max(cwnd * beta', 2),
 *    fast convergence and alpha of the Reno-friendly estimate.
 *
 * 2. Optionally (rtt_aware=1) an RTT-aware recovery time, after T. Kozu,
 *    Y. Akiyama, S. Yamaguchi, "Improving RTT fairness on CUBIC TCP",
 *    CANDAR 2013, which scales K with a monotonically decreasing function
 *    of the RTT. That paper's exact function is not reproduced here; ours
 *    is, with R = rtt_ref_ms and s the smoothed RTT at the epoch start,
 *
 *	K_eff = K * f(s),  f(s) = 2R / (R + s)
 *
 *    f(R) = 1 (plain CUBIC at the reference RTT), f -> 2 as s -> 0 (short
 *    paths recover more slowly), f -> 0 as s -> inf (long paths sooner),
 *    strictly decreasing, bounded, one integer division. Before the
 *    first RTT sample (s = 0) f = 1.
 *
 * Fixed point: windows in 1/1024 segment, time in microseconds from
 * tp->tcp_mstamp (never jiffies: the lab's UML kernel runs at HZ=100),
 * beta' in millionths, alpha in 1/65536. The cubic term is computed with
 * a 128-bit intermediate (mul_u64_u64_div_u64) and |t - K| is capped at
 * 2^29 us (~537 s), so nothing overflows. Slow start is plain RFC 5681
 * slow start (no HyStart). Parameters are copied into every connection
 * at .init, so changing one never affects a live connection.
 *
 * Written for Tortoise Lab from the RFC and the papers.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/ctype.h>
#include <linux/string.h>
#include <linux/math64.h>
#include <net/tcp.h>

#define CUBICPLUS_MILLI		1000U		/* decimal parameter scale */
#define CUBICPLUS_PPM		1000000U	/* beta' scale */
#define CUBICPLUS_WSHIFT	10		/* windows in 1/1024 segment */
#define CUBICPLUS_ASHIFT	16		/* alpha in 1/65536 */
#define CUBICPLUS_MIN_CWND	2U
/* Largest window (segments) the 1/1024 fixed point keeps in a u32. */
#define CUBICPLUS_WND_MAX	(U32_MAX >> CUBICPLUS_WSHIFT)
/* Cap on |t - K| in us: keeps (t - K)^3 below 2^87, the result below 2^36. */
#define CUBICPLUS_DT_MAX_US	BIT_ULL(29)
/*
 * C * d^3 in 1/1024 segment for d in us, C = 0.4:
 *   0.4 * 1024 * d^3 / 10^18 = d^3 / (10^19 / 4096) = d^3 / 2441406250000000
 */
#define CUBICPLUS_CUBE_DIV	2441406250000000ULL
/*
 * K in units of 100 us from dW in 1/1024 segment, C = 0.4:
 *   K = 10^4 * cbrt(dW / 1024 / 0.4) = cbrt(dW * 2.5 * 10^12 / 1024)
 *     = cbrt(dW * 2441406250);  dW < 2^32 keeps the product below 2^64.
 */
#define CUBICPLUS_K_MUL		2441406250ULL
#define CUBICPLUS_K_UNIT_US	100U

/* A bounded module parameter; decimal ones are stored in thousandths. */
struct cubicplus_param {
	unsigned int val;
	unsigned int min;
	unsigned int max;
};

static struct cubicplus_param cubicplus_beta = {
	.val = 700, .min = 500, .max = 950,
};

static struct cubicplus_param cubicplus_n = {
	.val = 6, .min = 1, .max = 16,
};

static struct cubicplus_param cubicplus_fast_convergence = {
	.val = 1, .min = 0, .max = 1,
};

static struct cubicplus_param cubicplus_rtt_aware = {
	.val = 0, .min = 0, .max = 1,
};

static struct cubicplus_param cubicplus_rtt_ref_ms = {
	.val = 100, .min = 1, .max = 10000,
};

/* Per-connection state, lives in inet_csk(sk)->icsk_ca_priv. */
struct cubicplus {
	u64 epoch_start_us;	/* start of the congestion avoidance epoch */
	u64 last_ack_us;	/* last ACK that acknowledged data */
	u64 w_est_fp;		/* Reno-friendly estimate W_est, 1/1024 seg */
	u64 est_acc;		/* remainder of alpha * acked not yet in W_est */
	u32 beta_ppm;		/* beta' = 1 - (1 - beta)/n, millionths */
	u32 alpha_fp;		/* 3(1 - beta')/(1 + beta'), 1/65536 */
	u32 w_max_fp;		/* W_max, 1/1024 segment */
	u32 prev_w_max_fp;	/* W_max before the last congestion event */
	u32 k_us;		/* K (RTT-scaled if rtt_aware), us */
	u32 cwnd_epoch;		/* cwnd at the start of the epoch, segments */
	u32 cwnd_prior;		/* cwnd at the last congestion event */
	u32 undo_w_max_fp;	/* W_max and previous W_max to restore on undo */
	u32 undo_prev_w_max_fp;
	u32 rtt_ref_us;		/* snapshot of rtt_ref_ms, in us */
	u8 fast_convergence;	/* snapshot of the parameter */
	u8 rtt_aware;		/* snapshot of the parameter */
	u8 epoch_valid;		/* epoch_start_us etc. describe the current epoch */
	u8 after_rto;		/* next epoch follows an RTO (RFC 9438 4.8) */
	u8 undo_valid;		/* undo_* hold the state before a reduction */
};

/*
 * Parse "D[.F]" with 1..6 integer digits and 1..3 fractional digits into
 * thousandths: "0.8" -> 800, "0.95" -> 950, "1" -> 1000.
 */
static int cubicplus_parse_milli(const char *s, size_t len, unsigned int *out)
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
	*out = ipart * CUBICPLUS_MILLI + fpart;
	return 0;
}

static int cubicplus_milli_set(const char *val, const struct kernel_param *kp)
{
	struct cubicplus_param *p = kp->arg;
	size_t len = strlen(val);
	unsigned int v;

	if (len && val[len - 1] == '\n')	/* from echo into sysfs */
		len--;
	if (cubicplus_parse_milli(val, len, &v) || v < p->min || v > p->max) {
		pr_err("invalid %s '%.*s': must be a decimal from %u.%03u to %u.%03u with at most 3 fractional digits\n",
		       kp->name, (int)len, val,
		       p->min / CUBICPLUS_MILLI, p->min % CUBICPLUS_MILLI,
		       p->max / CUBICPLUS_MILLI, p->max % CUBICPLUS_MILLI);
		return -EINVAL;
	}
	WRITE_ONCE(p->val, v);
	return 0;
}

static int cubicplus_milli_get(char *buffer, const struct kernel_param *kp)
{
	const struct cubicplus_param *p = kp->arg;
	unsigned int v = READ_ONCE(p->val);

	return scnprintf(buffer, PAGE_SIZE, "%u.%03u\n",
			 v / CUBICPLUS_MILLI, v % CUBICPLUS_MILLI);
}

static const struct kernel_param_ops cubicplus_milli_ops = {
	.set = cubicplus_milli_set,
	.get = cubicplus_milli_get,
};

static int cubicplus_uint_set(const char *val, const struct kernel_param *kp)
{
	struct cubicplus_param *p = kp->arg;
	size_t len = strlen(val);
	unsigned int v;

	if (kstrtouint(val, 10, &v) || v < p->min || v > p->max) {
		if (len && val[len - 1] == '\n')
			len--;
		pr_err("invalid %s '%.*s': must be an integer from %u to %u\n",
		       kp->name, (int)len, val, p->min, p->max);
		return -EINVAL;
	}
	WRITE_ONCE(p->val, v);
	return 0;
}

static int cubicplus_uint_get(char *buffer, const struct kernel_param *kp)
{
	const struct cubicplus_param *p = kp->arg;

	return scnprintf(buffer, PAGE_SIZE, "%u\n", READ_ONCE(p->val));
}

static const struct kernel_param_ops cubicplus_uint_ops = {
	.set = cubicplus_uint_set,
	.get = cubicplus_uint_get,
};

module_param_cb(beta, &cubicplus_milli_ops, &cubicplus_beta, 0644);
MODULE_PARM_DESC(beta, "CUBIC multiplicative decrease factor beta, 0.5-0.95 (default 0.7)");
module_param_cb(n, &cubicplus_uint_ops, &cubicplus_n, 0644);
MODULE_PARM_DESC(n, "back-off divisor: beta' = 1 - (1 - beta)/n, 1-16 (default 6; 1 = plain CUBIC)");
module_param_cb(fast_convergence, &cubicplus_uint_ops, &cubicplus_fast_convergence, 0644);
MODULE_PARM_DESC(fast_convergence, "RFC 9438 fast convergence, 0 or 1 (default 1)");
module_param_cb(rtt_aware, &cubicplus_uint_ops, &cubicplus_rtt_aware, 0644);
MODULE_PARM_DESC(rtt_aware, "scale K by 2R/(R + srtt), R = rtt_ref_ms, 0 or 1 (default 0)");
module_param_cb(rtt_ref_ms, &cubicplus_uint_ops, &cubicplus_rtt_ref_ms, 0644);
MODULE_PARM_DESC(rtt_ref_ms, "reference RTT R of the RTT-aware K in ms, 1-10000 (default 100)");

/* floor(cbrt(a)) by integer Newton iteration from above. */
static u32 cubicplus_cbrt(u64 a)
{
	u64 x, y;

	if (!a)
		return 0;
	/* 2^ceil(bits/3) > cbrt(a), and <= 2^22 so x * x fits easily */
	x = 1ULL << DIV_ROUND_UP(fls64(a), 3);
	for (;;) {
		/* AM-GM: y >= floor(cbrt(a)); it decreases until it gets there */
		y = div_u64(2 * x + div64_u64(a, x * x), 3);
		if (y >= x)
			return (u32)x;
		x = y;
	}
}

/* W_cubic(t) in 1/1024 segment, t in us since the epoch start. */
static u64 cubicplus_w_cubic(const struct cubicplus *ca, u64 t_us)
{
	bool below = t_us < ca->k_us;
	u64 d = below ? ca->k_us - t_us : t_us - ca->k_us;
	u64 off;

	if (!d)
		return ca->w_max_fp;
	d = min_t(u64, d, CUBICPLUS_DT_MAX_US);
	off = mul_u64_u64_div_u64(d * d, d, CUBICPLUS_CUBE_DIV);
	if (!below)
		return ca->w_max_fp + off;
	return ca->w_max_fp > off ? ca->w_max_fp - off : 0;
}

/* First congestion avoidance ACK after a congestion event, RTO or idle. */
static void cubicplus_epoch_start(struct sock *sk, struct cubicplus *ca)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	u32 cwnd = tcp_snd_cwnd(tp);
	u32 cwnd_fp = min(cwnd, CUBICPLUS_WND_MAX) << CUBICPLUS_WSHIFT;
	u32 srtt_us = tp->srtt_us >> 3;
	u64 k;

	ca->epoch_valid = 1;
	ca->epoch_start_us = tp->tcp_mstamp;
	ca->cwnd_epoch = cwnd;
	ca->w_est_fp = (u64)cwnd << CUBICPLUS_WSHIFT;
	ca->est_acc = 0;

	/*
	 * At or above the old maximum (or right after an RTO, RFC 9438 4.8):
	 * the plateau is where we are now, K = 0.
	 */
	if (ca->after_rto || ca->w_max_fp <= cwnd_fp) {
		ca->after_rto = 0;
		ca->w_max_fp = cwnd_fp;
		ca->k_us = 0;
		return;
	}

	k = (u64)cubicplus_cbrt((u64)(ca->w_max_fp - cwnd_fp) * CUBICPLUS_K_MUL) *
	    CUBICPLUS_K_UNIT_US;			/* <= 2.65e8 us */
	if (ca->rtt_aware && srtt_us)			/* f(s) = 2R / (R + s) */
		k = div64_u64(k * 2 * ca->rtt_ref_us,
			      (u64)ca->rtt_ref_us + srtt_us);	/* <= 2K */
	ca->k_us = (u32)min_t(u64, k, U32_MAX);
}

/* RFC 9438 4.3: W_est grows by alpha per window of ACKed segments. */
static void cubicplus_update_west(struct cubicplus *ca, u32 cwnd, u32 acked)
{
	u64 per_seg = (u64)cwnd << (CUBICPLUS_ASHIFT - CUBICPLUS_WSHIFT);
	u32 alpha = ca->alpha_fp;
	u64 rem;

	if (ca->cwnd_prior &&
	    ca->w_est_fp >= ((u64)ca->cwnd_prior << CUBICPLUS_WSHIFT))
		alpha = 1U << CUBICPLUS_ASHIFT;
	ca->est_acc += (u64)alpha * acked;
	if (ca->est_acc >= per_seg) {
		ca->w_est_fp += div64_u64_rem(ca->est_acc, per_seg, &rem);
		ca->est_acc = rem;
	}
	ca->w_est_fp = min_t(u64, ca->w_est_fp,
			     (u64)CUBICPLUS_WND_MAX << CUBICPLUS_WSHIFT);
}

static void cubicplus_grow(struct sock *sk, struct cubicplus *ca, u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	u32 cwnd = max(tcp_snd_cwnd(tp), 1U);
	u64 cwnd_fp = (u64)cwnd << CUBICPLUS_WSHIFT;
	u64 t_us, target;

	if (!ca->epoch_valid)
		cubicplus_epoch_start(sk, ca);
	t_us = tp->tcp_mstamp > ca->epoch_start_us ?
	       tp->tcp_mstamp - ca->epoch_start_us : 0;

	cubicplus_update_west(ca, cwnd, acked);

	/* Reno-friendly region: follow W_est. */
	if (cubicplus_w_cubic(ca, t_us) < ca->w_est_fp) {
		u32 est = (u32)min_t(u64, ca->w_est_fp >> CUBICPLUS_WSHIFT,
				     tp->snd_cwnd_clamp);

		if (est > cwnd)
			tcp_snd_cwnd_set(tp, est);
		return;
	}

	/* Concave or convex region: aim at W_cubic one RTT ahead. */
	target = cubicplus_w_cubic(ca, t_us + (tp->srtt_us >> 3));
	target = clamp(target, cwnd_fp, cwnd_fp + (cwnd_fp >> 1));
	if (target > cwnd_fp) {
		/* +(target - cwnd)/cwnd per segment = +1 per w segments */
		u64 w = div64_u64(cwnd_fp, target - cwnd_fp);	/* >= 2 */

		tcp_cong_avoid_ai(tp, (u32)min_t(u64, w, U32_MAX), acked);
	}
}

static void cubicplus_cong_avoid(struct sock *sk, u32 ack, u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct cubicplus *ca = inet_csk_ca(sk);

	if (!tcp_is_cwnd_limited(sk))
		return;

	if (tcp_in_slow_start(tp)) {
		acked = tcp_slow_start(tp, acked);
		if (!acked)
			return;
	}
	cubicplus_grow(sk, ca, acked);
}

/* Congestion event: fast convergence, then the beta' reduction. */
static u32 cubicplus_ssthresh(struct sock *sk)
{
	struct cubicplus *ca = inet_csk_ca(sk);
	u32 cwnd = tcp_snd_cwnd(tcp_sk(sk));
	u32 cwnd_fp = min(cwnd, CUBICPLUS_WND_MAX) << CUBICPLUS_WSHIFT;
	u64 reduced;

	ca->undo_w_max_fp = ca->w_max_fp;
	ca->undo_prev_w_max_fp = ca->prev_w_max_fp;
	ca->undo_valid = 1;

	ca->epoch_valid = 0;
	ca->cwnd_prior = cwnd;
	ca->prev_w_max_fp = ca->w_max_fp;
	if (ca->fast_convergence && cwnd_fp < ca->w_max_fp)
		/* W_max = cwnd * (1 + beta') / 2 */
		ca->w_max_fp = (u32)div_u64((u64)cwnd_fp *
					    (CUBICPLUS_PPM + ca->beta_ppm),
					    2 * CUBICPLUS_PPM);
	else
		ca->w_max_fp = cwnd_fp;

	reduced = div_u64((u64)cwnd * ca->beta_ppm, CUBICPLUS_PPM);
	return (u32)max_t(u64, reduced, CUBICPLUS_MIN_CWND);
}

/* The reduction was spurious (RFC 9438 4.9): restore what it changed. */
static u32 cubicplus_undo_cwnd(struct sock *sk)
{
	struct cubicplus *ca = inet_csk_ca(sk);

	if (ca->undo_valid) {
		ca->w_max_fp = ca->undo_w_max_fp;
		ca->prev_w_max_fp = ca->undo_prev_w_max_fp;
		ca->undo_valid = 0;
	}
	ca->after_rto = 0;
	ca->epoch_valid = 0;	/* next epoch starts from the restored cwnd */
	return max(tcp_snd_cwnd(tcp_sk(sk)), ca->cwnd_prior);
}

static void cubicplus_set_state(struct sock *sk, u8 new_state)
{
	struct cubicplus *ca = inet_csk_ca(sk);

	if (new_state == TCP_CA_Loss) {	/* RTO; ssthresh already ran */
		ca->epoch_valid = 0;
		ca->after_rto = 1;
	}
}

/* Sending after idle: leave the idle time out of t. */
static void cubicplus_tx_start(struct sock *sk)
{
	struct cubicplus *ca = inet_csk_ca(sk);
	u64 now = tcp_sk(sk)->tcp_mstamp;
	u64 idle_from;

	if (!ca->epoch_valid)
		return;
	idle_from = max(ca->last_ack_us, ca->epoch_start_us);
	if (now > idle_from)
		ca->epoch_start_us += now - idle_from;
}

static void cubicplus_cwnd_event(struct sock *sk, enum tcp_ca_event ev)
{
	struct cubicplus *ca = inet_csk_ca(sk);

	switch (ev) {
	case CA_EVENT_TX_START:
		/* kernels without the cwnd_event_tx_start op (6.12) */
		cubicplus_tx_start(sk);
		break;
	case CA_EVENT_CWND_RESTART:
		/* the stack shrank cwnd after idle (RFC 2861): new epoch */
		ca->epoch_valid = 0;
		break;
	default:
		break;
	}
}

static void cubicplus_pkts_acked(struct sock *sk, const struct ack_sample *sample)
{
	struct cubicplus *ca = inet_csk_ca(sk);

	ca->last_ack_us = tcp_sk(sk)->tcp_mstamp;
}

static void cubicplus_init(struct sock *sk)
{
	struct cubicplus *ca = inet_csk_ca(sk);
	u32 beta = READ_ONCE(cubicplus_beta.val);
	u32 n = max(READ_ONCE(cubicplus_n.val), 1U);
	u32 b;

	memset(ca, 0, sizeof(*ca));
	/* beta' = 1 - (1 - beta)/n, beta in thousandths -> beta' in millionths */
	b = CUBICPLUS_PPM - (CUBICPLUS_MILLI - beta) * CUBICPLUS_MILLI / n;
	ca->beta_ppm = b;
	ca->alpha_fp = (u32)DIV_ROUND_CLOSEST_ULL((u64)3 * (CUBICPLUS_PPM - b) <<
						  CUBICPLUS_ASHIFT,
						  CUBICPLUS_PPM + b);
	ca->fast_convergence = !!READ_ONCE(cubicplus_fast_convergence.val);
	ca->rtt_aware = !!READ_ONCE(cubicplus_rtt_aware.val);
	ca->rtt_ref_us = READ_ONCE(cubicplus_rtt_ref_ms.val) * USEC_PER_MSEC;
}

static struct tcp_congestion_ops cubicplus_ops __read_mostly = {
	.init		= cubicplus_init,
	.ssthresh	= cubicplus_ssthresh,
	.undo_cwnd	= cubicplus_undo_cwnd,
	.cong_avoid	= cubicplus_cong_avoid,
	.set_state	= cubicplus_set_state,
	.cwnd_event	= cubicplus_cwnd_event,
#ifdef TL_HAVE_CWND_EVENT_TX_START
	/* newer kernels (7.3) deliver CA_EVENT_TX_START only through this op,
	 * no longer to cwnd_event: without it the idle time would count in t */
	.cwnd_event_tx_start = cubicplus_tx_start,
#endif
	.pkts_acked	= cubicplus_pkts_acked,
	.owner		= THIS_MODULE,
	.name		= "cubic_plus",
};

static int __init cubicplus_register(void)
{
	BUILD_BUG_ON(sizeof(struct cubicplus) > ICSK_CA_PRIV_SIZE);
	return tcp_register_congestion_control(&cubicplus_ops);
}

static void __exit cubicplus_unregister(void)
{
	tcp_unregister_congestion_control(&cubicplus_ops);
}

module_init(cubicplus_register);
module_exit(cubicplus_unregister);

MODULE_AUTHOR("Tortoise Lab");
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("CUBIC+ (RFC 9438 CUBIC with beta' = 1 - (1 - beta)/n and optional RTT-aware K)");
