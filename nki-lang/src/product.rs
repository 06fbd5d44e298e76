//! Products of symbolic dimensions: `N * C` (NKI's `n * c` of traced shapes, as in
//! `src.reshape((n * c, h, w))`) is a symbol of the program's table named by its factors, so that
//! it works wherever a symbolic dimension does (a reshape's or an output's dimension, a trip
//! count, a mask bound, a launch constraint). A launch binds it after its factors
//! ([`crate::SymbolSource::Product`]).
//!
//! The name lists the factors, symbols and at most one leading literal, joined by
//! [`PRODUCT_SEPARATOR`]: `N * C`, `64 * N`. Factors are themselves never products, and symbols are
//! sorted, so equal products have one name.

/// What joins a product's factors in its name.
pub const PRODUCT_SEPARATOR: &str = " * ";

/// Whether the symbol called `name` is a product.
pub fn is_product(name: &str) -> bool {
    crate::derived::root(name) == Some(crate::derived::Root::Product)
}

/// One factor of a product's name.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Factor<'a> {
    /// A literal.
    Literal(u64),
    /// A symbol, by name.
    Symbol(&'a str),
}

/// The factors of the symbol called `name` (just the symbol itself for a plain one or another
/// [`crate::derived`] symbol; a factor that is itself an expression stays parenthesised).
pub fn factors(name: &str) -> impl Iterator<Item = Factor<'_>> {
    let parts: Vec<&str> = if crate::derived::root(name) == Some(crate::derived::Root::Product) {
        top_level_split(name)
    } else {
        vec![name]
    };
    parts.into_iter().map(|f| match f.parse::<u64>() {
        Ok(n) => Factor::Literal(n),
        Err(_) => Factor::Symbol(f),
    })
}

/// `name` split at each [`PRODUCT_SEPARATOR`] outside parentheses.
fn top_level_split(name: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut from = 0usize;
    for (i, c) in name.char_indices() {
        match c {
            '(' => depth = depth.saturating_add(1),
            ')' => depth = depth.saturating_sub(1),
            _ if depth == 0 && name[i..].starts_with(PRODUCT_SEPARATOR) => {
                parts.push(&name[from..i]);
                from = i.saturating_add(PRODUCT_SEPARATOR.len());
            }
            _ => {}
        }
    }
    parts.push(&name[from..]);
    parts
}

/// The name of the product of `literal` and the symbols `names` (plain or products, which are
/// flattened): symbols sorted, the literal first unless it is 1; `None` when the literals'
/// product passes `u64::MAX` or there is nothing to multiply but literals.
pub fn product_name(literal: u64, names: &[&str]) -> Option<String> {
    let mut lit = literal;
    let mut syms: Vec<String> = Vec::new();
    for name in names {
        for f in factors(name) {
            match f {
                Factor::Literal(n) => lit = lit.checked_mul(n)?,
                Factor::Symbol(s) => syms.push(crate::derived::operand(s)),
            }
        }
    }
    if syms.is_empty() {
        return None;
    }
    syms.sort_unstable();
    let mut parts: Vec<String> = Vec::new();
    if lit != 1 {
        parts.push(lit.to_string());
    }
    parts.extend(syms);
    Some(parts.join(PRODUCT_SEPARATOR))
}

/// The value of the product called `name`, each symbol's value given by `value` (`None` for a
/// factor it does not know); `None` also past `u64::MAX`.
pub fn product_value(name: &str, value: impl Fn(&str) -> Option<u64>) -> Option<u64> {
    factors(name).try_fold(1u64, |acc, f| {
        let n = match f {
            Factor::Literal(n) => n,
            Factor::Symbol(s) => value(s)?,
        };
        acc.checked_mul(n)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_canonical_and_values_multiply_the_factors() {
        assert_eq!(product_name(1, &["N", "C"]).as_deref(), Some("C * N"));
        assert_eq!(
            product_name(1, &["C * N", "H"]).as_deref(),
            Some("C * H * N")
        );
        assert_eq!(product_name(64, &["N"]).as_deref(), Some("64 * N"));
        assert_eq!(product_name(2, &["32 * N"]).as_deref(), Some("64 * N"));
        assert_eq!(product_name(5, &[]), None);
        assert_eq!(product_name(u64::MAX, &["2 * N"]), None);
        let value = |s: &str| match s {
            "N" => Some(3),
            "C" => Some(7),
            _ => None,
        };
        assert_eq!(product_value("C * N", value), Some(21));
        assert_eq!(product_value("64 * N", value), Some(192));
        assert_eq!(product_value("C * X", value), None);
        assert_eq!(product_value("N", value), Some(3));
        assert_eq!(product_value("4294967296 * 4294967296", value), None);
        assert!(is_product("C * N") && !is_product("N"));
        assert_eq!(
            product_name(2, &["h / k_h"]).as_deref(),
            Some("2 * (h / k_h)")
        );
        assert_eq!(
            factors("2 * (h / k_h)").collect::<Vec<_>>(),
            [Factor::Literal(2), Factor::Symbol("(h / k_h)")]
        );
        assert_eq!(factors("h / k_h").count(), 1);
    }
}
