//! Symbols computed from other symbols: NKI's arithmetic on traced dimensions. A product
//! (`N * C`, [`crate::product`]), a quotient (`h / k_h`, Python's `h // k_h`) or a sum
//! (`H + 2`, `H + W`) of the kernel's symbolic dimensions is a symbol of the program's table
//! named by the expression itself, so that it works wherever a symbolic dimension does (a trip
//! count, a reshape's dimension, a mask bound). A launch binds it from the values of the
//! symbols it names ([`crate::SymbolSource::Product`], [`crate::SymbolSource::Quotient`],
//! [`crate::SymbolSource::Sum`]).
//!
//! A name is an expression of literals, the symbols bound by inputs and the launch grid
//! (`N`, `num_programs(0)`), parentheses and the operators `+`, `-`, `*` and `/`, each written
//! between single spaces, with Python's precedence and left associativity:
//! - `/` is floor division of non-negative integers (Python's `//`); a divisor of 0 is an
//!   [`EvalError::DivisionByZero`];
//! - `-` is the difference clamped at 0 (`max(0, a − b)`): it appears only in the trip count of
//!   a loop with a start and a step (`affine_range(1, K / 128, 2)` runs
//!   `(K / 128) / 2` times, `affine_range(3, K, 2)` runs `(K - 2) / 2` times), where it is
//!   Python's `len(range(start, stop, step))`;
//! - everything else is checked: a value past `u64::MAX` is an [`EvalError::Overflow`].
//!
//! Operands that are themselves expressions are parenthesised by the builders here, so that
//! equal expressions built the same way have one name.

use thiserror::Error;

/// Why a derived symbol has no value.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum EvalError {
    /// A symbol the name uses has no value.
    #[error("`{0}` has no value")]
    Unknown(String),
    /// An intermediate or final value passes `u64::MAX`.
    #[error("a value passes 2^64 - 1")]
    Overflow,
    /// A divisor is 0.
    #[error("`{divisor}` is 0")]
    DivisionByZero {
        /// The divisor's text (`k_h`).
        divisor: String,
    },
    /// The name is no expression of the form above.
    #[error("`{0}` is not an expression of symbols and literals")]
    Malformed(String),
}

/// The operator at the root of a derived symbol's name.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Root {
    /// `a + b` or `a - b`.
    Sum,
    /// `a * b`.
    Product,
    /// `a / b`.
    Quotient,
}

/// The operator at the root of the expression `name` (the last one outside parentheses of the
/// lowest precedence), or `None` for a plain symbol, a literal or a parenthesised expression.
pub fn root(name: &str) -> Option<Root> {
    let mut depth = 0usize;
    let mut additive = None;
    let mut multiplicative = None;
    let bytes = name.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'(' => depth = depth.saturating_add(1),
            b')' => depth = depth.saturating_sub(1),
            b'+' | b'-' | b'*' | b'/' if depth == 0 => {
                // Operators stand between spaces; anything else is part of a name.
                let spaced = i.checked_sub(1).and_then(|j| bytes.get(j)) == Some(&b' ')
                    && bytes.get(i.saturating_add(1)) == Some(&b' ');
                if !spaced {
                    continue;
                }
                if matches!(b, b'+' | b'-') {
                    additive = Some(Root::Sum);
                } else if b == b'*' {
                    multiplicative = Some(Root::Product);
                } else {
                    multiplicative = Some(Root::Quotient);
                }
            }
            _ => {}
        }
    }
    additive.or(multiplicative)
}

/// `name` as an operand: parenthesised when it is an expression not parenthesised already.
pub fn operand(name: &str) -> String {
    if root(name).is_some() {
        format!("({name})")
    } else {
        name.to_string()
    }
}

/// The name of `a / b` (Python's `a // b`).
pub fn quotient_name(a: &str, b: &str) -> String {
    format!("{} / {}", operand(a), operand(b))
}

/// The name of `a + b`, its operands in sorted order (a sum of sums is not flattened).
pub fn sum_name(a: &str, b: &str) -> String {
    let (a, b) = (operand(a), operand(b));
    if a <= b {
        format!("{a} + {b}")
    } else {
        format!("{b} + {a}")
    }
}

/// The name of `(a + add) / div` (`add` may be negative: the difference clamped at 0), with
/// the parts that are 0 or 1 left out: `a`, `a + 2`, `a / 128`, `(a - 2) / 2`.
pub fn offset_quotient_name(a: &str, add: i64, div: u64) -> String {
    // `*` and `/` bind tighter than `+` and `-`: only a sum needs parentheses.
    let a = match root(a) {
        Some(Root::Sum) => format!("({a})"),
        _ => a.to_string(),
    };
    let top = match add {
        0 => a,
        n if n > 0 => format!("{a} + {n}"),
        n => format!("{a} - {}", n.unsigned_abs()),
    };
    match (div, root(&top)) {
        (1, _) => top,
        // A product divided by a literal reads left to right (`C * N / 128`).
        (d, Some(Root::Product) | None) => format!("{top} / {d}"),
        (d, Some(Root::Sum | Root::Quotient)) => format!("({top}) / {d}"),
    }
}

/// The value of the expression `name`, each symbol's value given by `value`.
pub fn value(name: &str, value: &mut dyn FnMut(&str) -> Option<u64>) -> Result<u64, EvalError> {
    let tokens = tokens(name).ok_or_else(|| EvalError::Malformed(name.to_string()))?;
    let mut p = Parser {
        tokens: &tokens,
        at: 0,
        value,
    };
    let v = p.sum().map_err(|e| match e {
        EvalError::Malformed(_) => EvalError::Malformed(name.to_string()),
        e @ (EvalError::Unknown(_) | EvalError::Overflow | EvalError::DivisionByZero { .. }) => e,
    })?;
    if p.at != tokens.len() {
        return Err(EvalError::Malformed(name.to_string()));
    }
    Ok(v)
}

/// The symbols the expression `name` names (not its literals), in order; `None` when it is no
/// expression of the form above.
pub fn atoms(name: &str) -> Option<Vec<&str>> {
    let tokens = tokens(name)?;
    if !well_formed(name) {
        return None;
    }
    Some(
        tokens
            .iter()
            .filter_map(|t| match t {
                Token::Atom(a) => Some(*a),
                Token::Literal(_) | Token::Op(_) | Token::Open | Token::Close => None,
            })
            .collect(),
    )
}

/// Whether `name` parses as an expression (its symbols' values aside).
fn well_formed(name: &str) -> bool {
    !matches!(value(name, &mut |_| Some(1)), Err(EvalError::Malformed(_)))
}

/// The deepest nesting of parentheses in a derived symbol's name.
const MAX_NESTING: usize = 32;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Token<'a> {
    Literal(u64),
    Atom(&'a str),
    Op(u8),
    Open,
    Close,
}

/// Splits `name` into tokens; `None` for a character no name holds or an unbalanced call.
fn tokens(name: &str) -> Option<Vec<Token<'_>>> {
    let mut out = Vec::new();
    let mut chars = name.char_indices().peekable();
    // The end of the run of characters from `chars` that `keep` accepts.
    let run_end = |chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>,
                   keep: &dyn Fn(char) -> bool| {
        while chars.next_if(|&(_, c)| keep(c)).is_some() {}
        chars.peek().map_or(name.len(), |&(j, _)| j)
    };
    // The parser recurses once per parenthesis: a name nested deeper is no derived symbol.
    let mut depth = 0usize;
    while let Some((i, c)) = chars.next() {
        match c {
            ' ' => {}
            '(' => {
                depth = depth.saturating_add(1);
                if depth > MAX_NESTING {
                    return None;
                }
                out.push(Token::Open);
            }
            ')' => {
                depth = depth.saturating_sub(1);
                out.push(Token::Close);
            }
            '+' | '-' | '*' | '/' => out.push(Token::Op(u8::try_from(c).ok()?)),
            '0'..='9' => {
                let end = run_end(&mut chars, &|c| c.is_ascii_digit());
                out.push(Token::Literal(name.get(i..end)?.parse().ok()?));
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let mut end = run_end(&mut chars, &|c| c.is_ascii_alphanumeric() || c == '_');
                // A call (`num_programs(0)`) is part of the name.
                if chars.next_if(|&(_, c)| c == '(').is_some() {
                    end = run_end(&mut chars, &|c| c != ')');
                    let (close, _) = chars.next()?;
                    end = end.max(close.checked_add(1)?);
                }
                out.push(Token::Atom(name.get(i..end)?));
            }
            _ => return None,
        }
    }
    Some(out)
}

struct Parser<'t, 'a, 'f> {
    tokens: &'t [Token<'a>],
    at: usize,
    value: &'f mut dyn FnMut(&str) -> Option<u64>,
}

impl<'a> Parser<'_, 'a, '_> {
    fn peek(&self) -> Option<Token<'a>> {
        self.tokens.get(self.at).copied()
    }

    fn malformed(&self) -> EvalError {
        EvalError::Malformed(text(self.tokens))
    }

    /// `term (("+" | "-") term)*`.
    fn sum(&mut self) -> Result<u64, EvalError> {
        let mut v = self.term()?.0;
        while let Some(Token::Op(op @ (b'+' | b'-'))) = self.peek() {
            self.at = self.at.saturating_add(1);
            let w = self.term()?.0;
            v = if op == b'+' {
                v.checked_add(w).ok_or(EvalError::Overflow)?
            } else {
                v.saturating_sub(w)
            };
        }
        Ok(v)
    }

    /// `factor (("*" | "/") factor)*`, with the text of the last factor (for an error).
    fn term(&mut self) -> Result<(u64, String), EvalError> {
        let (mut v, mut text) = self.factor()?;
        while let Some(Token::Op(op @ (b'*' | b'/'))) = self.peek() {
            self.at = self.at.saturating_add(1);
            let (w, t) = self.factor()?;
            v = if op == b'*' {
                v.checked_mul(w).ok_or(EvalError::Overflow)?
            } else {
                v.checked_div(w)
                    .ok_or_else(|| EvalError::DivisionByZero { divisor: t.clone() })?
            };
            text = t;
        }
        Ok((v, text))
    }

    /// A literal, a symbol or a parenthesised expression, with its text.
    fn factor(&mut self) -> Result<(u64, String), EvalError> {
        let t = self.peek().ok_or_else(|| self.malformed())?;
        self.at = self.at.saturating_add(1);
        match t {
            Token::Literal(n) => Ok((n, n.to_string())),
            Token::Atom(a) => match (self.value)(a) {
                Some(v) => Ok((v, a.to_string())),
                None => Err(EvalError::Unknown(a.to_string())),
            },
            Token::Open => {
                let from = self.at;
                let v = self.sum()?;
                if self.peek() != Some(Token::Close) {
                    return Err(self.malformed());
                }
                let text = self.tokens.get(from..self.at).map(text).unwrap_or_default();
                self.at = self.at.saturating_add(1);
                Ok((v, format!("({text})")))
            }
            Token::Op(_) | Token::Close => Err(self.malformed()),
        }
    }
}

/// The text of `tokens`, operators between spaces.
fn text(tokens: &[Token<'_>]) -> String {
    let mut s = String::new();
    for t in tokens {
        match *t {
            Token::Literal(n) => s.push_str(&n.to_string()),
            Token::Atom(a) => s.push_str(a),
            Token::Op(op) => {
                s.push(' ');
                s.push(char::from(op));
                s.push(' ');
            }
            Token::Open => s.push('('),
            Token::Close => s.push(')'),
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(s: &str) -> Option<u64> {
        match s {
            "h" => Some(32),
            "k_h" => Some(8),
            "K" => Some(1000),
            "Z" => Some(0),
            "num_programs(0)" => Some(4),
            _ => None,
        }
    }

    #[test]
    fn names_parse_with_python_precedence_and_floor_division() {
        let v = |n: &str| value(n, &mut values);
        assert_eq!(v("h / k_h"), Ok(4));
        assert_eq!(v("K / 128"), Ok(7));
        assert_eq!(v("(K + 127) / 128"), Ok(8));
        assert_eq!(v("(K / 128) / 2"), Ok(3));
        assert_eq!(v("(K / 128 - 2) / 2"), Ok(2));
        assert_eq!(v("3 - K"), Ok(0));
        assert_eq!(v("h + k_h"), Ok(40));
        assert_eq!(v("64 * h * k_h"), Ok(16384));
        assert_eq!(v("K / num_programs(0)"), Ok(250));
        assert_eq!(
            v("h / Z"),
            Err(EvalError::DivisionByZero {
                divisor: "Z".to_string()
            })
        );
        assert_eq!(
            v("h / (Z * k_h)"),
            Err(EvalError::DivisionByZero {
                divisor: "(Z * k_h)".to_string()
            })
        );
        assert_eq!(v("18446744073709551615 + h"), Err(EvalError::Overflow));
        assert_eq!(v("h / X"), Err(EvalError::Unknown("X".to_string())));
        assert!(matches!(v("h / "), Err(EvalError::Malformed(_))));
        assert!(matches!(v("(h"), Err(EvalError::Malformed(_))));
        let deep = format!("{}h{}", "(".repeat(100_000), ")".repeat(100_000));
        assert!(matches!(v(&deep), Err(EvalError::Malformed(_))));
        assert_eq!(atoms(&deep), None);
    }

    #[test]
    fn builders_parenthesise_operands_and_roots_are_found() {
        assert_eq!(quotient_name("h", "k_h"), "h / k_h");
        assert_eq!(quotient_name("C * N", "K"), "(C * N) / K");
        assert_eq!(operand("(h / k_h)"), "(h / k_h)");
        assert_eq!(sum_name("W", "H"), "H + W");
        assert_eq!(offset_quotient_name("K / 128", -2, 2), "(K / 128 - 2) / 2");
        assert_eq!(offset_quotient_name("K", 0, 2), "K / 2");
        assert_eq!(offset_quotient_name("K", 3, 1), "K + 3");
        assert_eq!(
            offset_quotient_name("C * N", 127, 128),
            "(C * N + 127) / 128"
        );
        assert_eq!(offset_quotient_name("C * N", 0, 128), "C * N / 128");
        assert_eq!(offset_quotient_name("H + W", 0, 2), "(H + W) / 2");
        assert_eq!(value("C * N / 128", &mut |_| Some(16)), Ok(2));
        assert_eq!(root("h / k_h"), Some(Root::Quotient));
        assert_eq!(root("(K + 127) / 128"), Some(Root::Quotient));
        assert_eq!(root("C * N"), Some(Root::Product));
        assert_eq!(root("H + 2"), Some(Root::Sum));
        assert_eq!(root("num_programs(0)"), None);
        assert_eq!(root("N"), None);
        assert_eq!(
            atoms("(h + 2) / num_programs(0)"),
            Some(vec!["h", "num_programs(0)"])
        );
        assert_eq!(atoms("h +"), None);
    }
}
