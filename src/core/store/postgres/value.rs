//! [`Val`], airlock's portable value, as PostgreSQL parameters and result columns: integers are
//! bound as the integer type the server inferred, texts as text; results of the integer, float,
//! boolean and text types read back as values.

use crate::core::store::value::Val;
use postgres::types::{FromSql, ToSql, Type};

/// The column and parameter types a portable statement uses.
fn portable_type(ty: &Type) -> bool {
    [
        Type::INT2,
        Type::INT4,
        Type::INT8,
        Type::FLOAT4,
        Type::FLOAT8,
        Type::BOOL,
        Type::TEXT,
        Type::VARCHAR,
        Type::BPCHAR,
        Type::NAME,
        Type::UNKNOWN,
    ]
    .contains(ty)
}

/// A portable value bound as the parameter type PostgreSQL inferred.
impl ToSql for Val {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> Result<postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
        use postgres::types::IsNull;
        match self {
            Val::Null => Ok(IsNull::Yes),
            Val::Int(v) => match *ty {
                Type::INT4 => i32::try_from(*v)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(*v)?.to_sql(ty, out),
                Type::FLOAT8 => (*v as f64).to_sql(ty, out),
                Type::BOOL => (*v != 0).to_sql(ty, out),
                _ => v.to_sql(ty, out),
            },
            Val::Real(v) => v.to_sql(ty, out),
            Val::Text(t) => t.as_str().to_sql(ty, out),
        }
    }

    fn accepts(ty: &Type) -> bool {
        portable_type(ty)
    }

    postgres::types::to_sql_checked!();
}

/// A result column as a portable value.
impl<'a> FromSql<'a> for Val {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Val, Box<dyn std::error::Error + Sync + Send>> {
        Ok(match *ty {
            Type::INT8 => Val::Int(i64::from_sql(ty, raw)?),
            Type::INT4 => Val::Int(i32::from_sql(ty, raw)?.into()),
            Type::INT2 => Val::Int(i16::from_sql(ty, raw)?.into()),
            Type::FLOAT8 => Val::Real(f64::from_sql(ty, raw)?),
            Type::FLOAT4 => Val::Real(f32::from_sql(ty, raw)?.into()),
            Type::BOOL => Val::Int(bool::from_sql(ty, raw)?.into()),
            _ => Val::Text(String::from_sql(ty, raw)?),
        })
    }

    fn from_sql_null(_: &Type) -> Result<Val, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Val::Null)
    }

    fn accepts(ty: &Type) -> bool {
        portable_type(ty)
    }
}
